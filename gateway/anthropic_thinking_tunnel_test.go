package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// Through the tunnel, a thinking model's reasoning reaches a Messages
// client that enabled thinking as a thinking block before the text,
// whether vLLM streams it (reasoning_content, as older versions name it)
// or ignores "stream": true and answers one chat.completion (reasoning);
// a client that did not enable thinking gets the text alone.
func TestAnthropicTunnelThinking(t *testing.T) {
	answers := map[string]func(w http.ResponseWriter){
		"streamed": func(w http.ResponseWriter) {
			writeSSE(w, chunk(`{"role":"assistant","content":""}`, "null"), chunk(`{"reasoning_content":"Hmm."}`, "null"),
				chunk(`{"content":"Hi"}`, "null"), chunk(`{"content":""}`, `"stop"`), usageChunk(12, 3), sseDone)
		},
		"whole": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
				`"choices":[{"index":0,"message":{"role":"assistant","reasoning":"Hmm.","content":"Hi"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
		},
	}
	for name, answer := range answers {
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { answer(w) })
		s := tunnelStack(t, u)
		cl := anClient(t, s.Edge, "")
		for _, enabled := range []bool{true, false} {
			p := anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 2048, Messages: []anthropic.MessageParam{userText("Hi")}}
			want := []string{"text:Hi"}
			if enabled {
				p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
				want = []string{"thinking:Hmm.", "text:Hi"}
			}
			acc := accumulate(t, cl.Messages.NewStreaming(ctxT(t), p))
			var got []string
			for _, b := range acc.Content {
				got = append(got, b.Type+":"+b.Text+b.Thinking)
			}
			if strings.Join(got, "|") != strings.Join(want, "|") || acc.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("%s, thinking %v: blocks %q (stop %q), want %q", name, enabled, got, acc.StopReason, want)
			}
		}
	}
}
