package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// A conversation on prefix_affinity whose turn failed over from a to b
// continues on b although a is listed first: failover's re-acquire
// hashes the same prompt as the first acquire, so affinity learns b
// served it (b holds its KV cache), and its grant drops a (which answered
// 503 and holds nothing) from that prompt's entries; with both matching
// alike, the order would pick a.
func TestFailoverTargetListedSecondKeepsConversation(t *testing.T) {
	var failed atomic.Bool
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") && failed.CompareAndSwap(false, true) {
			writeJSON(w, http.StatusServiceUnavailable, thinkoffBusy)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	b := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("a", a.baseURL()), vllmProvider("b", b.baseURL())})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "prefix_affinity", MaxAttempts: 2, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "a", Target: target}, {Node: nodeID, Provider: "b", Target: target}}}}
	e, _ := startStack(t, cfg)
	an := anClient(t, e, "")

	first := "Tell me about tides. " + strings.Repeat("Context that makes the prompt long. ", 40)
	if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText(first)}}); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, e, "a")
	waitReleased(t, e, "b")
	if na, nb := len(a.requests()), len(b.requests()); na != 1 || nb != 1 || !failed.Load() {
		t.Fatalf("first turn: a served %d requests, b %d; want a's 503 and b's answer", na, nb)
	}
	if n := metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": "unavailable"}); n != 1 {
		t.Fatalf("failovers %v, want 1", n)
	}

	for i, next := range []string{"And the sun?", "And the wind?"} {
		msgs := []anthropic.MessageParam{userText(first)}
		if i > 0 {
			msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock("Hello! How can I help you today?")), userText("And the sun?"))
		}
		msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock("Hello! How can I help you today?")), userText(next))
		if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		waitReleased(t, e, "b")
		reqs := b.requests()
		if len(reqs) != 2+i || !bytes.Contains(reqs[1+i].Body, []byte(next)) {
			t.Fatalf("turn %d went to a (b served %d requests, a %d)", i+2, len(reqs), len(a.requests()))
		}
	}
}
