package gateway_test

// tool_choice and parallel_tool_calls on the text tool-call path: the
// model answers with <tool_call> blocks in text and may ignore what the
// instruction told it, so the edge restores only the calls the request
// allows, the same streamed or not, on /v1/chat/completions and on
// /v1/messages.

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/internal/stack"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The blocks a model writes: a call of get_weather, then two of get_time.
const (
	tcWeather = `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	tcCET     = `<tool_call>{"name": "get_time", "arguments": {"tz": "CET"}}</tool_call>`
	tcUTC     = `<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>`
	// tcAnswer is text with all three calls.
	tcAnswer = "Checking.\n" + tcWeather + "\n" + tcCET + "\n" + tcUTC
)

// A restored call, as name(arguments).
const (
	callWeather = `get_weather({"city":"Paris"})`
	callCET     = `get_time({"tz":"CET"})`
	callUTC     = `get_time({"tz":"UTC"})`
)

// textScript is what textToolStack's node answers, and what it was asked.
type textScript struct {
	mu       sync.Mutex
	answer   string
	markLast bool
	got      *iop.RunRequest // the last RunRequest
}

func (s *textScript) set(answer string, markLast bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer, s.markLast = answer, markLast
}

func (s *textScript) lastInput() *iop.RunInput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.GetInput()
}

// textToolStack is an edge whose node answers every run with the script's
// answer, in 7-byte deltas (blocks and tags split across them), the run
// marked as a text tool-call run on its START event or, with markLast,
// only on its COMPLETE event.
func textToolStack(t *testing.T, sc *textScript) *stack.Edge {
	e, _ := scriptedRunStack(t, func(rr *iop.RunRequest) []*iop.RunEvent {
		sc.mu.Lock()
		sc.got = proto.Clone(rr).(*iop.RunRequest)
		text, last := sc.answer, sc.markLast
		sc.mu.Unlock()
		mark := map[string]string{"openai_text_tool_fallback": "true"}
		start := &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START}
		complete := &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop",
			Usage: &iop.Usage{PromptTokens: 40, CompletionTokens: 30}}
		if last {
			complete.Metadata = mark
		} else {
			start.Metadata = mark
		}
		evs := []*iop.RunEvent{start}
		for i := 0; i < len(text); i += 7 {
			evs = append(evs, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: text[i:min(i+7, len(text))]})
		}
		return append(evs, complete)
	})
	return e
}

func callsOf(calls []oai.ChatCompletionMessageToolCallUnion) []string {
	out := []string{}
	for _, c := range calls {
		out = append(out, c.Function.Name+"("+c.Function.Arguments+")")
	}
	return out
}

func TestCompatTextToolCallsHonourToolChoice(t *testing.T) {
	sc := &textScript{}
	e := textToolStack(t, sc)
	cl := oaGoClient(t, e)
	named := func(n string) oai.ChatCompletionToolChoiceOptionUnionParam {
		return oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: n})
	}
	mode := func(m string) oai.ChatCompletionToolChoiceOptionUnionParam {
		return oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(m)}
	}
	for _, c := range []struct {
		name     string
		answer   string
		choice   oai.ChatCompletionToolChoiceOptionUnionParam
		parallel param.Opt[bool]
		content  *string // nil: content null
		calls    []string
	}{{
		name:    "no constraint",
		answer:  tcAnswer,
		content: ptr("Checking.\n\n\n"),
		calls:   []string{callWeather, callCET, callUTC},
	}, {
		// Only get_time is restored; the get_weather block stays in the
		// content, as the model wrote it.
		name:    "named function",
		answer:  tcAnswer,
		choice:  named("get_time"),
		content: ptr("Checking.\n" + tcWeather + "\n\n"),
		calls:   []string{callCET, callUTC},
	}, {
		// The first call only; later calls are dropped, not left as text.
		name:     "parallel_tool_calls false",
		answer:   tcAnswer,
		parallel: oai.Bool(false),
		content:  ptr("Checking.\n\n\n"),
		calls:    []string{callWeather},
	}, {
		name:     "named function, parallel_tool_calls false",
		answer:   tcAnswer,
		choice:   named("get_time"),
		parallel: oai.Bool(false),
		content:  ptr("Checking.\n" + tcWeather + "\n\n"),
		calls:    []string{callCET},
	}, {
		name:     "required, parallel_tool_calls false, only calls",
		answer:   "\n" + tcCET + "\n" + tcWeather + "\n",
		choice:   mode("required"),
		parallel: oai.Bool(false),
		content:  nil,
		calls:    []string{callCET},
	}, {
		name:     "parallel_tool_calls true",
		answer:   tcAnswer,
		parallel: oai.Bool(true),
		content:  ptr("Checking.\n\n\n"),
		calls:    []string{callWeather, callCET, callUTC},
	}, {
		// No call is restored: the text is the answer, verbatim.
		name:    "none",
		answer:  tcAnswer,
		choice:  mode("none"),
		content: ptr(tcAnswer),
		calls:   []string{},
	}, {
		// A named function that no other block calls: nothing is restored.
		name:    "named function not called",
		answer:  "Checking.\n" + tcWeather,
		choice:  named("get_time"),
		content: ptr("Checking.\n" + tcWeather),
		calls:   []string{},
	}} {
		for _, last := range []bool{false, true} {
			sc.set(c.answer, last)
			name := c.name
			if last {
				name += ", marked at the end"
			}
			params := oai.ChatCompletionNewParams{
				Model:    "demo",
				Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Weather and time in Paris?")},
				Tools: []oai.ChatCompletionToolUnionParam{
					oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
					oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time"}),
				},
				ToolChoice:        c.choice,
				ParallelToolCalls: c.parallel,
			}
			resp, err := cl.Chat.Completions.New(ctxT(t), params)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// The node gets the constraints its instruction states
			// (nodeagent/openaicompat toolInstruction).
			if in := sc.lastInput(); in.ParallelToolCalls != nil != c.parallel.Valid() ||
				in.GetParallelToolCalls() != c.parallel.Value {
				t.Errorf("%s: run input parallel_tool_calls %v", name, in.ParallelToolCalls)
			}
			msg := resp.Choices[0].Message
			wantFinish := "stop"
			if len(c.calls) > 0 {
				wantFinish = "tool_calls"
			}
			if null := msg.JSON.Content.Raw() == "null"; null != (c.content == nil) || (!null && msg.Content != *c.content) ||
				!equalStrings(callsOf(msg.ToolCalls), c.calls) || resp.Choices[0].FinishReason != wantFinish {
				t.Errorf("%s: non-stream content %s, calls %v, finish %q; want %q (nil: null), %v, %q",
					name, msg.JSON.Content.Raw(), callsOf(msg.ToolCalls), resp.Choices[0].FinishReason, deref(c.content), c.calls, wantFinish)
			}

			st := cl.Chat.Completions.NewStreaming(ctxT(t), params)
			var acc oai.ChatCompletionAccumulator
			for st.Next() {
				if !acc.AddChunk(st.Current()) {
					t.Fatalf("%s: the accumulator refused chunk %s", name, st.Current().RawJSON())
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("%s: stream: %v", name, err)
			}
			sm := acc.Choices[0].Message
			if sm.Content != msg.Content || !equalStrings(callsOf(sm.ToolCalls), callsOf(msg.ToolCalls)) ||
				acc.Choices[0].FinishReason != resp.Choices[0].FinishReason {
				t.Errorf("%s: streamed content %q, calls %v, finish %q; non-stream %q, %v, %q", name,
					sm.Content, callsOf(sm.ToolCalls), acc.Choices[0].FinishReason, msg.Content, callsOf(msg.ToolCalls), resp.Choices[0].FinishReason)
			}
		}
	}

	// A named function reaches the node as such.
	if tc := sc.lastInput().GetToolChoice(); tc.GetMode() != iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION || tc.GetFunctionName() != "get_time" {
		t.Errorf("last run input: tool_choice %v", tc)
	}
}

// /v1/messages maps tool_choice {type:"tool"}, "any", "none" and
// disable_parallel_tool_use onto the same restoration. (No text follows
// the calls here: a stream opens a new text block for text after a
// tool_use, where a whole answer puts all its text first.)
func TestCompatTextToolUseHonoursAnthropicToolChoice(t *testing.T) {
	sc := &textScript{answer: "Checking.\n" + tcWeather + tcCET + tcUTC}
	e := textToolStack(t, sc)
	an := anClient(t, e, "")
	tool := func(name string) anthropic.ToolUnionParam {
		return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name, InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	}
	for _, c := range []struct {
		name   string
		choice anthropic.ToolChoiceUnionParam
		blocks []string // text blocks as "text", tool_use as name(input)
		stop   anthropic.StopReason
	}{{
		name:   "tool, disable_parallel_tool_use",
		choice: anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_time", DisableParallelToolUse: anthropic.Bool(true)}},
		blocks: []string{"text", `get_time({"tz":"CET"})`},
		stop:   anthropic.StopReasonToolUse,
	}, {
		name:   "tool",
		choice: anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_time"}},
		blocks: []string{"text", `get_time({"tz":"CET"})`, `get_time({"tz":"UTC"})`},
		stop:   anthropic.StopReasonToolUse,
	}, {
		name:   "any, disable_parallel_tool_use",
		choice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}},
		blocks: []string{"text", `get_weather({"city":"Paris"})`},
		stop:   anthropic.StopReasonToolUse,
	}, {
		name:   "none",
		choice: anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}},
		blocks: []string{"text"},
		stop:   anthropic.StopReasonEndTurn,
	}} {
		ap := anthropic.MessageNewParams{Model: "demo", MaxTokens: 64, Tools: []anthropic.ToolUnionParam{tool("get_weather"), tool("get_time")},
			ToolChoice: c.choice, Messages: []anthropic.MessageParam{userText("Weather and time in Paris?")}}
		whole, err := an.Messages.New(ctxT(t), ap)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		streamed := accumulate(t, an.Messages.NewStreaming(ctxT(t), ap))
		for kind, m := range map[string]anthropic.Message{"non-stream": *whole, "stream": streamed} {
			if b := anthropicBlocks(m); !equalStrings(b, c.blocks) || m.StopReason != c.stop {
				t.Errorf("%s, %s: blocks %v, stop %q; want %v, %q", c.name, kind, b, m.StopReason, c.blocks, c.stop)
			}
		}
		if whole.Content[0].Text != streamed.Content[0].Text {
			t.Errorf("%s: text %q streamed, %q not", c.name, streamed.Content[0].Text, whole.Content[0].Text)
		}
	}
}

func anthropicBlocks(m anthropic.Message) []string {
	out := []string{}
	for _, b := range m.Content {
		switch b.Type {
		case "tool_use":
			var in any
			_ = json.Unmarshal(b.Input, &in)
			args, _ := json.Marshal(in)
			out = append(out, b.Name+"("+string(args)+")")
		default:
			out = append(out, b.Type)
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
