package gateway_test

// Compatibility of the run path with the official SDKs: a fake node
// scripts the RunEvents, the SDKs (openai-go, go-openai, the Anthropic Go
// SDK) talk to the edge over loopback.

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// scriptedRunStack is an edge (fakeNodeConfig: "demo" on the run path,
// "qwen-7b" on a tunnelled provider) whose node answers every run request
// with script's events, in order, then ends its side.
func scriptedRunStack(t *testing.T, script func(*iop.RunRequest) []*iop.RunEvent) (*stack.Edge, *fakeNode) {
	t.Helper()
	e := startEdge(t, fakeNodeConfig(t))
	n := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		n.record(first)
		rr := first.GetRunRequest()
		if rr == nil {
			return
		}
		for i, ev := range script(rr) {
			ev.RunId, ev.Sequence = rr.GetRunId(), uint64(i+1)
			if st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}) != nil {
				return
			}
		}
		_ = st.CloseWrite()
		<-ctx.Done()
	})
	return e, n
}

// oaGoClient is the official OpenAI Go SDK (openai-go) pointed at the edge.
func oaGoClient(t *testing.T, e *stack.Edge) oai.Client {
	t.Helper()
	return oai.NewClient(option.WithBaseURL(e.URL+"/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(httpClient(t)), option.WithMaxRetries(0))
}

// A provider that streams a little whitespace before its native tool calls
// (vLLM's tool parsers pass on the "\n\n" a model writes before its call):
// the non-stream answer has content null, so the stream must not carry
// that whitespace as content either, and an Anthropic client must get the
// same blocks (tool_use only) streamed or not. The stream used to send
// content "\n\n" (and, on /v1/messages, a whitespace-only text block that
// Anthropic's API refuses when the conversation is sent back to it).
func TestCompatBlankContentBeforeNativeToolCalls(t *testing.T) {
	const calls = `[{"id":"call_w","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"call_t","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]`
	e, _ := scriptedRunStack(t, func(*iop.RunRequest) []*iop.RunEvent {
		return []*iop.RunEvent{
			{Type: iop.RunEventType_RUN_EVENT_TYPE_START},
			{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "\n"},
			{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "\n "},
			{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "tool_calls",
				Usage: &iop.Usage{PromptTokens: 9, CompletionTokens: 12}, Metadata: map[string]string{"openai_tool_calls": calls}},
		}
	})
	cl := oaGoClient(t, e)
	params := oai.ChatCompletionNewParams{
		Model:    "demo",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Weather and time in Paris?")},
		Tools: []oai.ChatCompletionToolUnionParam{
			oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
			oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time"}),
		},
	}
	resp, err := cl.Chat.Completions.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if raw := msg.JSON.Content.Raw(); raw != "null" || len(msg.ToolCalls) != 2 {
		t.Fatalf("non-stream message: content %s, %d tool calls", raw, len(msg.ToolCalls))
	}

	st := cl.Chat.Completions.NewStreaming(ctxT(t), params)
	var acc oai.ChatCompletionAccumulator
	var finished []string
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			t.Fatalf("the accumulator refused chunk %s", st.Current().RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc.ID)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	sm := acc.Choices[0].Message
	if sm.Content != msg.Content || len(sm.ToolCalls) != 2 || sm.ToolCalls[0].ID != "call_w" || sm.ToolCalls[1].ID != "call_t" ||
		acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("streamed message: content %q (non-stream %q), tool calls %+v, finish %q", sm.Content, msg.Content, sm.ToolCalls, acc.Choices[0].FinishReason)
	}
	if len(finished) != 2 {
		t.Errorf("JustFinishedToolCall reported %v, want both calls", finished)
	}

	// The Anthropic surface over the same run.
	an := anClient(t, e, "")
	tool := func(name string) anthropic.ToolUnionParam {
		return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name, InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	}
	ap := anthropic.MessageNewParams{Model: "demo", MaxTokens: 64, Tools: []anthropic.ToolUnionParam{tool("get_weather"), tool("get_time")},
		Messages: []anthropic.MessageParam{userText("Weather and time in Paris?")}}
	whole, err := an.Messages.New(ctxT(t), ap)
	if err != nil {
		t.Fatal(err)
	}
	streamed := accumulate(t, an.Messages.NewStreaming(ctxT(t), ap))
	blockTypes := func(m anthropic.Message) (out []string) {
		for _, b := range m.Content {
			out = append(out, b.Type)
		}
		return out
	}
	if w, s := blockTypes(*whole), blockTypes(streamed); len(w) != 2 || len(s) != len(w) || s[0] != "tool_use" || s[1] != "tool_use" {
		t.Errorf("Anthropic blocks: non-stream %v, stream %v; want two tool_use blocks each", w, s)
	}
	if streamed.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stop_reason %q", streamed.StopReason)
	}
}

// logprobs (chat) and logprobs / echo (legacy completions) ask for what a
// run cannot return: no token log probabilities cross the run wire, and
// the run renders only the generated text. The edge used to answer 200
// with "logprobs": null (openai-python's choice.logprobs.content then
// raises) and without the echoed prompt; it now refuses them with 400
// invalid_request on the run path, as OpenAI refuses logprobs for models
// that cannot return them, and as it refuses n > 1. A tunnelled provider
// still gets them.
func TestCompatRunRefusesLogprobsAndEcho(t *testing.T) {
	e, n := scriptedRunStack(t, func(*iop.RunRequest) []*iop.RunEvent {
		return []*iop.RunEvent{
			{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "ok"},
			{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop", Usage: &iop.Usage{PromptTokens: 1, CompletionTokens: 1}},
		}
	})
	cl := oaGoClient(t, e)
	params := oai.ChatCompletionNewParams{Model: "demo", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}
	if _, err := cl.Chat.Completions.New(ctxT(t), params); err != nil {
		t.Fatalf("without logprobs: %v", err)
	}
	n.nextRequest(t)

	wantRefused := func(what string, err error, param string) {
		t.Helper()
		var ae *oai.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Code != "invalid_request" {
			t.Errorf("%s: %v, want a 400 invalid_request", what, err)
			return
		}
		if param != "" && ae.Param != param {
			t.Errorf("%s: param %q, want %q", what, ae.Param, param)
		}
	}
	lp := params
	lp.Logprobs = oai.Bool(true)
	lp.TopLogprobs = oai.Int(2)
	_, err := cl.Chat.Completions.New(ctxT(t), lp)
	wantRefused("chat logprobs on a run-only model", err, "logprobs")
	// A request with tools for a tunnelled provider whose tool_mode is
	// auto is served as a run too.
	lp.Model = "qwen-7b"
	lp.Tools = []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"})}
	_, err = cl.Chat.Completions.New(ctxT(t), lp)
	wantRefused("chat logprobs on the run route of a tunnelled provider", err, "logprobs")
	st := cl.Chat.Completions.NewStreaming(ctxT(t), lp)
	for st.Next() {
	}
	wantRefused("streamed chat logprobs", st.Err(), "logprobs")

	goc := oaClient(t, e, "k")
	_, err = goc.CreateCompletion(ctxT(t), openai.CompletionRequest{Model: "demo", Prompt: "alpha", LogProbs: 1})
	if !isBadRequest(err, "logprobs") {
		t.Errorf("completion logprobs: %v, want a 400 naming logprobs", err)
	}
	_, err = goc.CreateCompletion(ctxT(t), openai.CompletionRequest{Model: "demo", Prompt: "alpha", Echo: true})
	if !isBadRequest(err, "echo") {
		t.Errorf("completion echo: %v, want a 400 naming echo", err)
	}
	select {
	case env := <-n.got:
		t.Errorf("the node received %v for a refused request", env)
	default:
	}
}

func isBadRequest(err error, param string) bool {
	var ae *openai.APIError
	return errors.As(err, &ae) && ae.HTTPStatusCode == http.StatusBadRequest && ae.Code == "invalid_request" &&
		ae.Param != nil && *ae.Param == param
}
