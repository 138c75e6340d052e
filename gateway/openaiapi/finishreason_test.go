package openaiapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// finish_reason is one of OpenAI's values on every rendering, whatever the
// provider said: typed SDKs decode it into a closed enum.
func TestFinishReasonIsOneOfOpenAIs(t *testing.T) {
	usage := &iop.Usage{PromptTokens: 1, CompletionTokens: 1}
	for provider, want := range map[string]string{
		"stop": "stop", "length": "length", "content_filter": "content_filter", "": "stop",
		"tool_calls": "stop", "function_call": "stop", // no calls were emitted
		"abort": "stop", "eos_token": "stop", "stop_sequence": "stop", "end_turn": "stop", "error": "stop",
		"max_tokens": "length", "model_length": "length", "max_length": "length",
		"LENGTH": "stop", strings.Repeat("x", 300): "stop",
	} {
		events := []*iop.RunEvent{evDelta("hi"), evComplete(provider, usage, nil)}

		chat := NewChatAggregator(RenderOptions{Model: "m"})
		comp := NewCompletionAggregator(RenderOptions{Model: "m"})
		var chatBuf, compBuf bytes.Buffer
		chatStream := NewChatStreamWriter(&chatBuf, nil, RenderOptions{Model: "m"})
		compStream := NewCompletionStreamWriter(&compBuf, nil, RenderOptions{Model: "m"})
		for _, ev := range events {
			chat.Add(ev)
			comp.Add(ev)
			if err := chatStream.Add(ev); err != nil {
				t.Fatal(err)
			}
			if err := compStream.Add(ev); err != nil {
				t.Fatal(err)
			}
		}
		body, e := chat.Result()
		if e != nil {
			t.Fatal(e)
		}
		cbody, e := comp.Result()
		if e != nil {
			t.Fatal(e)
		}
		got := map[string]string{
			"chat":              finishOf(t, body),
			"completion":        finishOf(t, cbody),
			"chat stream":       decodeChatStream(t, chatBuf.String()).finish,
			"completion stream": lastFinish(t, compBuf.String()),
		}
		for where, g := range got {
			if g != want {
				t.Errorf("provider %.20q: %s finish_reason %q, want %q", provider, where, g, want)
			}
		}
	}
}

func finishOf(t *testing.T, body []byte) string {
	t.Helper()
	var r struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("decode %s: %v", body, err)
	}
	return r.Choices[0].FinishReason
}

// lastFinish is the finish_reason of a completion stream's last choice.
func lastFinish(t *testing.T, raw string) string {
	t.Helper()
	finish := ""
	for _, data := range sseData(t, raw) {
		if data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return finish
}

// An answer cut short while it wrote a tool call reports "length", not
// "tool_calls", whole and streamed, as OpenAI does: the partial call is
// shown, but an agent loop that runs calls on "tool_calls" must not run
// one whose arguments were cut.
func TestCutShortToolCallsReportLength(t *testing.T) {
	partial := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Par"}}]`
	for provider, want := range map[string]string{"length": "length", "max_tokens": "length", "content_filter": "content_filter", "stop": "tool_calls", "tool_calls": "tool_calls"} {
		events := []*iop.RunEvent{evStart(nil), evComplete(provider, nil, map[string]string{MetaToolCalls: partial})}
		resp, body, e := aggregate(t, RenderOptions{Model: "m", ToolNames: offered}, events...)
		if e != nil {
			t.Fatal(e)
		}
		if len(resp.Choices[0].Message.ToolCalls) != 1 || resp.Choices[0].FinishReason != openai.FinishReason(want) {
			t.Errorf("provider %q: whole answer %s, want its call and finish_reason %q", provider, body, want)
		}
		raw, _, err := runStream(t, RenderOptions{Model: "m", ToolNames: offered}, events...)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeChatStream(t, raw).finish; got != want {
			t.Errorf("provider %q: streamed finish_reason %q, want %q", provider, got, want)
		}
	}
}
