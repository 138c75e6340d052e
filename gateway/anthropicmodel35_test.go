package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// A Messages answer's model is the provider's target, as the OpenAI
// surface answers on every route (Anthropic's model field is the model
// that handled the request): the tunnel's from the upstream's own value,
// a run's as its rendering names it; streamed in message_start, and in a
// whole answer, including one an upstream gave a stream request.
func TestAnthropicModelIsTarget(t *testing.T) {
	t.Run("tunnel", func(t *testing.T) {
		var whole atomic.Bool // the upstream ignores "stream": true
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var req struct {
				Stream bool `json:"stream"`
			}
			if err := json.Unmarshal(b, &req); err != nil || whole.Load() || !req.Stream {
				writeJSON(w, http.StatusOK, vllmChatJSON)
				return
			}
			writeSSE(w, contentStream("Hello", " world")...)
		})
		s := tunnelStack(t, u)
		cl := anClient(t, s.Edge, "")
		params := anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64, Messages: []anthropic.MessageParam{userText("Hi")}}
		msg, err := cl.Messages.New(ctxT(t), params)
		if err != nil || msg.Model != target {
			t.Fatalf("answer model %q (%v), want the target %q", msg.Model, err, target)
		}
		if acc := accumulate(t, cl.Messages.NewStreaming(ctxT(t), params)); acc.Model != target {
			t.Fatalf("message_start model %q, want the target %q", acc.Model, target)
		}
		whole.Store(true)
		if acc := accumulate(t, cl.Messages.NewStreaming(ctxT(t), params)); acc.Model != target || len(acc.Content) != 1 {
			t.Fatalf("a whole answer streamed: model %q (%d blocks), want the target %q and one block", acc.Model, len(acc.Content), target)
		}
	})
	t.Run("run", func(t *testing.T) {
		e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo")))
		cl := anClient(t, e, "")
		params := anthropic.MessageNewParams{Model: "demo", MaxTokens: 16, Messages: []anthropic.MessageParam{userText("one two")}}
		msg, err := cl.Messages.New(ctxT(t), params)
		if err != nil || msg.Model != "mock-echo" {
			t.Fatalf("answer model %q (%v), want the target mock-echo", msg.Model, err)
		}
		if acc := accumulate(t, cl.Messages.NewStreaming(ctxT(t), params)); acc.Model != "mock-echo" {
			t.Fatalf("message_start model %q, want the target mock-echo", acc.Model)
		}
	})
}
