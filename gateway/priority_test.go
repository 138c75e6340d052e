package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

// X-IOP-Priority and X-IOP-Deadline-Ms: bad values are a 400; a deadline
// shorter than the wait for a slot ends the request with 503
// queue_timeout when it passes, not after the model's queue timeout.
func TestQueueHeaders(t *testing.T) {
	mock := mockProvider("mock", map[string]any{"delay_ms": 3000})
	mock.Capacity = 1
	cfg := edgeConfig([]config.ProviderSpec{mock}, modelOn("demo", "mock", "echo"))
	cfg.Models[0].QueueTimeoutSec = 60
	e, _ := startStack(t, cfg)
	c := httpClient(t)
	body := `{"model":"demo","messages":[{"role":"user","content":"a b"}]}`
	for _, h := range []map[string]string{{"X-IOP-Priority": "high"}, {"X-IOP-Priority": "11"}, {"X-IOP-Deadline-Ms": "0"}, {"X-IOP-Deadline-Ms": "soon"}} {
		r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", body, h)
		assertError(t, r, http.StatusBadRequest, "invalid_request")
	}
	busy := postAsync(t, e, "/v1/chat/completions", body) // holds the one slot for ~3 s
	for deadline := time.Now().Add(waitLong); inFlight(e, "mock") != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the busy request never took the slot")
		}
	}
	start := time.Now()
	r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", body, map[string]string{"X-IOP-Deadline-Ms": "300", "X-IOP-Priority": "-3"})
	assertError(t, r, http.StatusServiceUnavailable, "queue_timeout")
	if waited := time.Since(start); waited > 2500*time.Millisecond {
		t.Fatalf("answered after %s: before the busy request ended, as the deadline asks", waited)
	}
	if got := <-busy; got.Status != http.StatusOK {
		t.Fatalf("busy request: %d %s", got.Status, got.Body)
	}
}
