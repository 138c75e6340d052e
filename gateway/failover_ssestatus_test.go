package gateway_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
)

// A 502/503/504 the backend sends as an event stream is still the backend
// saying it cannot serve now, and nothing has reached the client: the
// request moves to the next candidate as for a JSON 503 (docs/routing.md).
func TestFailoverOnUnavailableEventStream(t *testing.T) {
	var firstHits atomic.Int32
	first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		firstHits.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "data: {\"error\":{\"message\":\"engine overloaded\",\"code\":503}}\n\n")
	})
	second := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	e := twoUpstreams(t, first, second, 0)
	r := post(t, e, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON || firstHits.Load() != 1 || failovers(t, e, "unavailable") != 1 {
		t.Fatalf("%d %.200s, first hit %d times, failovers %v", r.Status, r.Body, firstHits.Load(), failovers(t, e, "unavailable"))
	}
	waitReleased(t, e, "first")
	waitReleased(t, e, "second")
}
