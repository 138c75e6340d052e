package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// twoUpstreams starts model "m" on vllm providers "first" (tried first:
// routing ordered) and "second", with maxAttempts.
func twoUpstreams(t *testing.T, first, second *upstream, maxAttempts int) *stack.Edge {
	t.Helper()
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("first", first.baseURL()), vllmProvider("second", second.baseURL())})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: maxAttempts, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "first", Target: target}, {Node: nodeID, Provider: "second", Target: target}}}}
	e, _ := startStack(t, cfg)
	return e
}

func failovers(t *testing.T, e *stack.Edge, reason string) float64 {
	return metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": reason})
}

const chatM = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// A 503 before the first byte moves the request to the next candidate;
// the client sees only the second provider's answer; both leases return.
func TestFailoverOn503(t *testing.T) {
	var hits atomic.Int32
	first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"engine overloaded","type":"ServiceUnavailableError","param":null,"code":503}}`)
	})
	second := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	e := twoUpstreams(t, first, second, 0)
	for _, stream := range []bool{false, true} {
		body := chatM
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		r := post(t, e, "/v1/chat/completions", body)
		if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON {
			t.Fatalf("stream=%v: %d %s", stream, r.Status, r.Body)
		}
	}
	if hits.Load() != 2 || failovers(t, e, "unavailable") != 2 {
		t.Fatalf("first hit %d times, failovers %v", hits.Load(), failovers(t, e, "unavailable"))
	}
	waitReleased(t, e, "first")
	waitReleased(t, e, "second")
	if got := metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "first", "reason": "error"}); got != 2 {
		t.Fatalf("first's leases released as error %v times, want 2", got)
	}
}

// Never for a 4xx, never past max_attempts, never after the first byte.
func TestFailoverLimits(t *testing.T) {
	first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if b, err := io.ReadAll(r.Body); err == nil {
			switch {
			case strings.Contains(string(b), "bad"):
				writeJSON(w, http.StatusBadRequest, vllmToolChoiceError)
				return
			case strings.Contains(string(b), `"stream":true`):
				writeSSE(w, chunk(`{"role":"assistant","content":"Hel"}`, "null"))
				panic(http.ErrAbortHandler) // the stream breaks after its first event
			}
		}
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"down","type":"ServiceUnavailableError","param":null,"code":503}}`)
	})
	var secondHits atomic.Int32
	second := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		secondHits.Add(1)
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	e := twoUpstreams(t, first, second, 0)
	if r := post(t, e, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"bad"}]}`); r.Status != http.StatusBadRequest {
		t.Fatalf("a 4xx: %d %s", r.Status, r.Body)
	}
	r := post(t, e, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "[DONE]") {
		t.Fatalf("a stream broken after its first byte: %d %s", r.Status, r.Body)
	}
	if secondHits.Load() != 0 {
		t.Fatalf("the second provider served %d requests it should not have", secondHits.Load())
	}

	one := twoUpstreams(t, first, second, 1)
	if r := post(t, one, "/v1/chat/completions", chatM); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("max_attempts 1: %d %s", r.Status, r.Body)
	}
	if secondHits.Load() != 0 || failovers(t, one, "unavailable") != 0 {
		t.Fatal("failed over with max_attempts 1")
	}
}

// Run path: a run that fails before anything was written (a whole answer)
// is tried on the next candidate.
func TestFailoverRunPath(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{
		mockProvider("broken", map[string]any{"fail_trigger": "boom"}), mockProvider("fine", nil)})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "broken", Target: "x"}, {Node: nodeID, Provider: "fine", Target: "x"}}}}
	e, _ := startStack(t, cfg)
	r := post(t, e, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"boom"}]}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"content":"boom"`) {
		t.Fatalf("run failover: %d %s", r.Status, r.Body)
	}
	if failovers(t, e, "unavailable") != 1 {
		t.Fatalf("failovers = %v", failovers(t, e, "unavailable"))
	}
	waitReleased(t, e, "broken")
	waitReleased(t, e, "fine")
}
