package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// An OpenAI-compatible upstream may end its SSE lines with CRLF (or a lone
// CR), as the SSE grammar allows; the Messages stream converted from it is
// the same as from an LF stream.
func TestAnthropicStreamFromCRLFUpstream(t *testing.T) {
	for name, eol := range map[string]string{"CRLF": "\r\n", "CR": "\r"} {
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			events := contentStream("Hello", " world")
			for i, ev := range events {
				events[i] = strings.ReplaceAll(ev, "\n", eol)
			}
			writeSSE(w, events...)
		})
		s := tunnelStack(t, u)
		cl := anClient(t, s.Edge, "")
		stream := cl.Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
			Messages: []anthropic.MessageParam{userText("Hi")}})
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("%s: accumulate: %v", name, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s: stream: %v", name, err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != "Hello world" || acc.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("%s: streamed message = %+v", name, acc)
		}
	}
}
