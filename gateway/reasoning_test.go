package gateway_test

// The model's reasoning (RunEvent.reasoning) on the run path: a chat
// answer carries it as "reasoning" (as a current vLLM does through the
// tunnel), a Messages answer as thinking blocks when the request enabled
// thinking, a legacy completion never.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const reasoningCalls = `[{"id":"call_w","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`

// reasoningScript interleaves reasoning, content and a native tool call;
// one event carries reasoning and content together.
func reasoningScript(rr *iop.RunRequest) []*iop.RunEvent {
	delta := iop.RunEventType_RUN_EVENT_TYPE_DELTA
	evs := []*iop.RunEvent{
		{Type: iop.RunEventType_RUN_EVENT_TYPE_START},
		{Type: delta, Reasoning: "The user"},
		{Type: delta, Reasoning: " wants weather."},
		{Type: delta, Reasoning: " Call the tool.", Delta: "Let me check."},
		{Type: delta, Reasoning: " Done."},
	}
	complete := &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "tool_calls",
		Usage: &iop.Usage{PromptTokens: 9, CompletionTokens: 12}}
	if rr.GetOperation() == iop.RunOperation_RUN_OPERATION_COMPLETION {
		complete.FinishReason = "stop"
	} else {
		complete.Metadata = map[string]string{"openai_tool_calls": reasoningCalls}
	}
	return append(evs, complete)
}

const wantReasoning = "The user wants weather. Call the tool. Done."

// chunkReasoning is what one chunk's delta carries as reasoning, read as
// a client of vLLM reads it (openai-go has no typed field for it).
func chunkReasoning(t *testing.T, c oai.ChatCompletionChunk) string {
	t.Helper()
	if len(c.Choices) == 0 {
		return ""
	}
	d := c.Choices[0].Delta
	if _, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
		t.Fatalf("chunk %s carries reasoning_content", c.RawJSON())
	}
	f, ok := d.JSON.ExtraFields[openaiapi.ReasoningField]
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
		t.Fatalf("chunk %s: reasoning %s", c.RawJSON(), f.Raw())
	}
	if s != "" && (d.Content != "" || len(d.ToolCalls) > 0) {
		t.Fatalf("chunk %s mixes reasoning with the answer", c.RawJSON())
	}
	return s
}

// Chat, whole and streamed, over the real wire, read with openai-go.
func TestRunChatReasoning(t *testing.T) {
	e, _ := scriptedRunStack(t, reasoningScript)
	cl := oaGoClient(t, e)
	params := oai.ChatCompletionNewParams{
		Model:    "demo",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Weather in Paris?")},
		Tools:    []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"})},
	}
	resp, err := cl.Chat.Completions.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if f, ok := msg.JSON.ExtraFields["reasoning"]; !ok || f.Raw() != `"`+wantReasoning+`"` {
		t.Errorf("message.reasoning: %s", msg.RawJSON())
	}
	if msg.Content != "Let me check." || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_w" || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("message %s, finish %q", msg.RawJSON(), resp.Choices[0].FinishReason)
	}

	st := cl.Chat.Completions.NewStreaming(ctxT(t), params)
	var acc oai.ChatCompletionAccumulator
	var reasoning strings.Builder
	for st.Next() {
		c := st.Current()
		if !acc.AddChunk(c) {
			t.Fatalf("the accumulator refused chunk %s", c.RawJSON())
		}
		reasoning.WriteString(chunkReasoning(t, c))
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	sm := acc.Choices[0].Message
	if reasoning.String() != wantReasoning || sm.Content != "Let me check." || len(sm.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("streamed: reasoning %q, content %q, calls %+v, finish %q", reasoning.String(), sm.Content, sm.ToolCalls, acc.Choices[0].FinishReason)
	}
}

// A legacy completion never shows reasoning, streamed or not.
func TestRunCompletionIgnoresReasoning(t *testing.T) {
	e, _ := scriptedRunStack(t, reasoningScript)
	goc := oaClient(t, e, "k")
	resp, err := goc.CreateCompletion(ctxT(t), openai.CompletionRequest{Model: "demo", Prompt: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Text != "Let me check." {
		t.Errorf("text %q", resp.Choices[0].Text)
	}
	r := post(t, e, "/v1/completions", `{"model":"demo","prompt":"alpha","stream":true}`)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "reasoning") || strings.Contains(string(r.Body), "Done.") {
		t.Errorf("stream %d: %s", r.Status, r.Body)
	}
	r = post(t, e, "/v1/completions", `{"model":"demo","prompt":"alpha"}`)
	if strings.Contains(string(r.Body), "reasoning") {
		t.Errorf("answer: %s", r.Body)
	}
}

// Messages: with thinking enabled, a thinking block (empty signature)
// comes before the text and the tool_use; a stream keeps the run's order,
// so the reasoning that came after the text is a second thinking block
// there (a whole chat answer holds its reasoning as one string). Without
// thinking, no thinking block at all. Read with the Anthropic Go SDK.
func TestRunMessagesThinking(t *testing.T) {
	e, _ := scriptedRunStack(t, reasoningScript)
	an := anClient(t, e, "")
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	base := anthropic.MessageNewParams{Model: "demo", MaxTokens: 2048, Tools: []anthropic.ToolUnionParam{tool},
		Messages: []anthropic.MessageParam{userText("Weather in Paris?")}}
	describe := func(m anthropic.Message) (out []string) {
		for _, b := range m.Content {
			switch b.Type {
			case "thinking":
				out = append(out, "thinking:"+b.Thinking+"|sig="+b.Signature)
			case "text":
				out = append(out, "text:"+b.Text)
			default:
				out = append(out, b.Type+":"+b.Name)
			}
		}
		return out
	}
	for _, enabled := range []bool{true, false} {
		p := base
		want := map[string][]string{
			"whole":    {"text:Let me check.", "tool_use:get_weather"},
			"streamed": {"text:Let me check.", "tool_use:get_weather"},
		}
		if enabled {
			p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
			want["whole"] = []string{"thinking:" + wantReasoning + "|sig=", "text:Let me check.", "tool_use:get_weather"}
			want["streamed"] = []string{"thinking:The user wants weather. Call the tool.|sig=", "text:Let me check.",
				"thinking: Done.|sig=", "tool_use:get_weather"}
		}
		whole, err := an.Messages.New(ctxT(t), p)
		if err != nil {
			t.Fatal(err)
		}
		streamed := accumulate(t, an.Messages.NewStreaming(ctxT(t), p))
		for what, m := range map[string]anthropic.Message{"whole": *whole, "streamed": streamed} {
			if got := describe(m); strings.Join(got, "\n") != strings.Join(want[what], "\n") || m.StopReason != anthropic.StopReasonToolUse {
				t.Errorf("thinking %v, %s: blocks %q (stop %q), want %q", enabled, what, got, m.StopReason, want[what])
			}
		}
	}
}

// End to end through a real node: the mock adapter's reasoning setting
// reaches an OpenAI client as "reasoning" (whole and streamed) and an
// Anthropic client that enabled thinking as a thinking block.
func TestMockReasoningEndToEnd(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", map[string]any{"reasoning": "Echo the user."})},
		modelOn("demo", "mock", "mock-echo"))
	e, _ := startStack(t, cfg)
	cl := oaGoClient(t, e)
	params := oai.ChatCompletionNewParams{Model: "demo", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello world")}}
	resp, err := cl.Chat.Completions.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if f := msg.JSON.ExtraFields["reasoning"]; f.Raw() != `"Echo the user."` || msg.Content != "hello world" ||
		resp.Usage.CompletionTokens != 5 {
		t.Errorf("message %s, usage %+v", msg.RawJSON(), resp.Usage)
	}
	st := cl.Chat.Completions.NewStreaming(ctxT(t), params)
	var reasoning, content strings.Builder
	for st.Next() {
		c := st.Current()
		reasoning.WriteString(chunkReasoning(t, c))
		if len(c.Choices) > 0 {
			content.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != "Echo the user." || content.String() != "hello world" {
		t.Errorf("streamed reasoning %q, content %q", reasoning.String(), content.String())
	}

	an := anClient(t, e, "")
	p := anthropic.MessageNewParams{Model: "demo", MaxTokens: 2048, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages: []anthropic.MessageParam{userText("hello world")}}
	m := accumulate(t, an.Messages.NewStreaming(ctxT(t), p))
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != "Echo the user." ||
		m.Content[1].Type != "text" || m.Content[1].Text != "hello world" || m.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("message %+v", m)
	}
}
