package openaiapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func evReasoning(s string) *iop.RunEvent {
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: s}
}

// reasoningDeltas decodes a chat stream's data payloads and returns, in
// order, what each chunk's delta carried: "r:<reasoning>" or "c:<content>"
// (the role chunk's empty content is skipped).
func reasoningDeltas(t *testing.T, raw string) []string {
	t.Helper()
	var out []string
	for _, d := range sseData(t, raw) {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, ch := range c.Choices {
			if _, ok := ch.Delta["reasoning_content"]; ok {
				t.Fatalf("chunk %q carries reasoning_content", d)
			}
			var s string
			if r, ok := ch.Delta["reasoning"]; ok {
				if json.Unmarshal(r, &s) != nil {
					t.Fatalf("chunk %q: reasoning is not a string", d)
				}
				out = append(out, "r:"+s)
			}
			if c, ok := ch.Delta["content"]; ok {
				if json.Unmarshal(c, &s) != nil {
					t.Fatalf("chunk %q: content is not a string", d)
				}
				if s != "" {
					out = append(out, "c:"+s)
				}
			}
		}
	}
	return out
}

// A chat run's reasoning streams as chunks whose delta carries only
// "reasoning", in the order the run sent it, apart from the content; an
// event carrying both sends its reasoning first. The content, the
// restored text tool call and the finish_reason are those of the same run
// without reasoning.
func TestChatStreamReasoning(t *testing.T) {
	opts := RenderOptions{ID: "chatcmpl-1", Model: "m", Created: 1, ToolNames: []string{"get_weather"}}
	call := `<tool_call>{"name":"get_weather","arguments":{"city":"Seoul"}}</tool_call>`
	events := []*iop.RunEvent{
		evStart(fallbackMeta),
		evReasoning("Let me"),
		evReasoning(" think."),
		{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: " Weather?", Delta: "Checking. "},
		evDelta(call),
		evReasoning(" Done."),
		evComplete("stop", &iop.Usage{PromptTokens: 3, CompletionTokens: 9}, nil),
	}
	raw, w, err := runStream(t, opts, events...)
	if err != nil {
		t.Fatal(err)
	}
	got := reasoningDeltas(t, raw)
	want := []string{"r:Let me", "r: think.", "r: Weather?", "c:Checking. ", "r: Done."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("deltas %q, want %q", got, want)
	}
	r := decodeChatStream(t, raw)
	if r.content != "Checking. " || len(r.calls) != 1 || r.calls[0].Function.Name != "get_weather" || r.finish != "tool_calls" || !r.done {
		t.Fatalf("content %q, calls %+v, finish %q, done %v", r.content, r.calls, r.finish, r.done)
	}
	if w.FinishReason() != "tool_calls" {
		t.Errorf("FinishReason %q", w.FinishReason())
	}

	// The same run without its reasoning renders the same content and calls.
	var plain []*iop.RunEvent
	for _, ev := range events {
		if ev.GetDelta() != "" || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_DELTA {
			c := proto.Clone(ev).(*iop.RunEvent)
			c.Reasoning = ""
			plain = append(plain, c)
		}
	}
	rawPlain, _, _ := runStream(t, opts, plain...)
	p := decodeChatStream(t, rawPlain)
	if p.content != r.content || p.finish != r.finish || len(p.calls) != len(r.calls) || p.calls[0].Function != r.calls[0].Function {
		t.Errorf("with reasoning %+v, without %+v", r, p)
	}
}

// The whole answer carries the reasoning as message.reasoning, never in
// content; tool calls and finish_reason are unchanged, and the completion
// token estimate counts the reasoning, as providers do.
func TestChatAggregatorReasoning(t *testing.T) {
	opts := RenderOptions{ID: "chatcmpl-1", Model: "m", Created: 1, ToolNames: []string{"get_weather"}, PromptTokens: 3}
	events := []*iop.RunEvent{
		evStart(fallbackMeta),
		evReasoning("Let me"),
		{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: " think.", Delta: "Sure. "},
		evDelta(`<tool_call>{"name":"get_weather","arguments":{"city":"Seoul"}}</tool_call>`),
		evComplete("stop", nil, nil),
	}
	resp, body, e := aggregate(t, opts, events...)
	if e != nil {
		t.Fatal(e)
	}
	var raw struct {
		Choices []struct {
			Message map[string]json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if got := string(raw.Choices[0].Message["reasoning"]); got != `"Let me think."` {
		t.Errorf("message.reasoning %s in %s", got, body)
	}
	if _, ok := raw.Choices[0].Message["reasoning_content"]; ok {
		t.Errorf("message carries reasoning_content: %s", body)
	}
	msg := resp.Choices[0].Message
	if msg.Content != "Sure. " || len(msg.ToolCalls) != 1 || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("content %q, calls %+v, finish %q", msg.Content, msg.ToolCalls, resp.Choices[0].FinishReason)
	}
	_, plainBody, _ := aggregate(t, opts, evStart(fallbackMeta), evDelta("Sure. "),
		evDelta(`<tool_call>{"name":"get_weather","arguments":{"city":"Seoul"}}</tool_call>`), evComplete("stop", nil, nil))
	var withU, withoutU struct{ Usage Usage }
	_ = json.Unmarshal(body, &withU)
	_ = json.Unmarshal(plainBody, &withoutU)
	if withU.Usage.CompletionTokens <= withoutU.Usage.CompletionTokens {
		t.Errorf("estimated completion tokens %d with reasoning, %d without", withU.Usage.CompletionTokens, withoutU.Usage.CompletionTokens)
	}

	// No reasoning: no reasoning member at all (answers stay as they were).
	_, body, _ = aggregate(t, opts, evDelta("hi"), evComplete("stop", nil, nil))
	if bytes.Contains(body, []byte("reasoning")) {
		t.Errorf("answer without reasoning: %s", body)
	}
}

// A chat run whose only output is reasoning (cut by max_tokens while
// thinking) produced an answer: it is rendered, not refused as an empty
// run, even without usage. For a legacy completion, which has nowhere to
// show reasoning, the same run is empty.
func TestReasoningOnlyRun(t *testing.T) {
	opts := RenderOptions{ID: "x", Model: "m", Created: 1}
	events := []*iop.RunEvent{evReasoning("Hmm"), evComplete("length", nil, nil)}
	resp, body, e := aggregate(t, opts, events...)
	if e != nil {
		t.Fatalf("chat aggregator: %v", e)
	}
	if resp.Choices[0].Message.Content != "" || resp.Choices[0].FinishReason != "length" || !bytes.Contains(body, []byte(`"reasoning":"Hmm"`)) {
		t.Errorf("chat answer %s", body)
	}
	raw, w, err := runStream(t, opts, events...)
	if err != nil || w.Failure() != nil {
		t.Fatalf("chat stream: %v / %v", err, w.Failure())
	}
	if got := reasoningDeltas(t, raw); len(got) != 1 || got[0] != "r:Hmm" {
		t.Errorf("chat stream deltas %q", got)
	}

	ca := NewCompletionAggregator(opts)
	for _, ev := range events {
		ca.Add(ev)
	}
	if _, e := ca.Result(); e == nil || e.Code != errEmptyRun().Code {
		t.Errorf("completion aggregator: %v, want the empty-run error", e)
	}
}

// Legacy completions never show reasoning: their whole answer is byte for
// byte that of the run without it, and so is their stream but for the
// empty-text chunk the first reasoning starts it with
// (TestCompletionStreamKeepAliveWhileThinking).
func TestCompletionIgnoresReasoning(t *testing.T) {
	opts := RenderOptions{ID: "cmpl-1", Model: "m", Created: 1, IncludeUsage: true}
	with := []*iop.RunEvent{evReasoning("think"), {Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "Hel", Reasoning: "more"},
		evDelta("lo"), evComplete("stop", &iop.Usage{PromptTokens: 1, CompletionTokens: 2}, nil)}
	without := []*iop.RunEvent{evDelta("Hel"), evDelta("lo"), evComplete("stop", &iop.Usage{PromptTokens: 1, CompletionTokens: 2}, nil)}
	render := func(evs []*iop.RunEvent) (string, string) {
		var buf bytes.Buffer
		sw := NewCompletionStreamWriter(&buf, nil, opts)
		a := NewCompletionAggregator(opts)
		for _, ev := range evs {
			if err := sw.Add(ev); err != nil {
				t.Fatal(err)
			}
			a.Add(ev)
		}
		body, e := a.Result()
		if e != nil {
			t.Fatal(e)
		}
		return buf.String(), string(body)
	}
	s1, b1 := render(with)
	s2, b2 := render(without)
	keepAlive := `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":"","index":0,"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	if s1 != keepAlive+s2 || b1 != b2 {
		t.Errorf("with reasoning:\n%s\n%s\nwithout:\n%s\n%s", s1, b1, s2, b2)
	}
}

// MaxAnswerBytes bounds a whole chat answer's text and reasoning together.
func TestChatAggregatorReasoningBound(t *testing.T) {
	a := NewChatAggregator(RenderOptions{})
	half := strings.Repeat("r", MaxAnswerBytes/2+1)
	if a.Add(evReasoning(half)) {
		t.Fatal("stopped after half the bound")
	}
	if !a.Add(evDelta(half)) || !a.Abandoned() {
		t.Fatal("text and reasoning over MaxAnswerBytes together were held")
	}
	if _, e := a.Result(); e == nil || e.Code != errAnswerTooLarge().Code {
		t.Errorf("Result: %v, want the answer-too-large error", e)
	}
}
