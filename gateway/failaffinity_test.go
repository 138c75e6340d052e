package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// A conversation on prefix_affinity whose turn failed over from a to b
// continues on b: failover's re-acquire hashes the same prompt as the
// first acquire, so prefix affinity learns b served it (b holds its KV
// cache; a answered 503 and holds nothing). The first turn is steered to a
// by a request held on b (b is listed first, so that with the prefix
// matching both, order picks b: without the failover's record only a
// matches, and the next turn goes back to a).
func TestFailoverTeachesPrefixAffinity(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var failed atomic.Bool
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") && failed.CompareAndSwap(false, true) {
			writeJSON(w, http.StatusServiceUnavailable, thinkoffBusy)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	b := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if body, _ := io.ReadAll(r.Body); bytes.Contains(body, []byte("HOLD")) {
			close(held)
			<-release
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("b", b.baseURL()), vllmProvider("a", a.baseURL())})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "prefix_affinity", MaxAttempts: 2, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "b", Target: target}, {Node: nodeID, Provider: "a", Target: target}}}}
	e, _ := startStack(t, cfg)
	an := anClient(t, e, "")

	heldDone := make(chan error, 1)
	go func() { // Owner: this test; ends when release lets b answer.
		_, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 8,
			Messages: []anthropic.MessageParam{userText("HOLD " + strings.Repeat("z", 600))}})
		heldDone <- err
	}()
	waitFor(t, held, waitLong, "the held request on b")

	first := "Tell me about tides. " + strings.Repeat("Context that makes the prompt long. ", 40)
	if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText(first)}}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	waitReleased(t, e, "a")
	waitReleased(t, e, "b")
	if na, nb := len(a.requests()), len(b.requests()); na != 1 || nb != 2 || !failed.Load() {
		t.Fatalf("first turn: a served %d requests, b %d; want a's 503 and b's answer", na, nb)
	}
	if n := metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": "unavailable"}); n != 1 {
		t.Fatalf("failovers %v, want 1", n)
	}

	if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Messages: []anthropic.MessageParam{
		userText(first),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock("Hello! How can I help you today?")),
		userText("And the sun?"),
	}}); err != nil {
		t.Fatal(err)
	}
	reqs := b.requests()
	if len(reqs) != 3 || !bytes.Contains(reqs[2].Body, []byte("And the sun?")) {
		t.Fatalf("the next turn went to a (b served %d requests, a %d)", len(reqs), len(a.requests()))
	}
}
