package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A Messages stream whose first event is the upstream's error is answered
// with that error at once; an upstream that then holds its stream open
// (no idle timeout to end it) must not hold the lease with it: the
// exchange is abandoned, the upstream's request cancelled, the lease back.
func TestMessagesFirstEventErrorReleasesTheLease35(t *testing.T) {
	cancelled := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		writeSSE(w, `data: {"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`+"\n\n")
		<-r.Context().Done()
		close(cancelled)
	})
	s := tunnelStack(t, u, func(cfg *config.Edge) {
		none := 0
		cfg.Limits.StreamIdleTimeoutSec = &none
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	r, err := tryDo(ctx, httpClient(t), http.MethodPost, s.Edge.URL+"/v1/messages",
		`{"model":"qwen-7b","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x"}]}`, nil)
	if err != nil {
		t.Fatalf("the error was not answered: %v", err)
	}
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	// The upstream still holds its stream: only the edge's abandoning the
	// exchange ends it.
	waitFor(t, cancelled, waitLong, "the upstream's request cancelled")
	waitReleased(t, s.Edge, "vllm-main")
}
