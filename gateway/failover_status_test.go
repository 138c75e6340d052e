package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// Every status that says the backend cannot serve now (502, 503, 504)
// moves the request to the next candidate; a 500 is the backend's answer
// and is relayed as it is.
func TestFailoverOnUnavailableStatuses(t *testing.T) {
	for _, tc := range []struct {
		status   int
		failover bool
	}{{http.StatusBadGateway, true}, {http.StatusServiceUnavailable, true}, {http.StatusGatewayTimeout, true}, {http.StatusInternalServerError, false}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, tc.status, fmt.Sprintf(`{"error":{"message":"down","type":"Error","param":null,"code":%d}}`, tc.status))
			})
			var secondHits atomic.Int32
			second := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				secondHits.Add(1)
				writeJSON(w, http.StatusOK, vllmChatJSON)
			})
			e := twoUpstreams(t, first, second, 0)
			r := post(t, e, "/v1/chat/completions", chatM)
			if tc.failover {
				if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON || failovers(t, e, "unavailable") != 1 {
					t.Fatalf("%d %s, failovers %v", r.Status, r.Body, failovers(t, e, "unavailable"))
				}
			} else if r.Status != tc.status || secondHits.Load() != 0 || failovers(t, e, "unavailable") != 0 {
				t.Fatalf("%d %s, second hit %d times", r.Status, r.Body, secondHits.Load())
			}
			waitReleased(t, e, "first")
			waitReleased(t, e, "second")
		})
	}
}

// A stream request the provider refuses with a 4xx or 5xx that is not an
// event stream gets the error in the OpenAI envelope (held and normalized
// like a whole answer), not the provider's own body.
func TestStreamRequestErrorStatusIsNormalized(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, status, `{"detail":"the request is wrong"}`)
			})
			second := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
			e := twoUpstreams(t, first, second, 1)
			r := post(t, e, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			if r.Status != status || !strings.Contains(string(r.Body), `"error":{`) || !strings.Contains(string(r.Body), "the request is wrong") {
				t.Fatalf("%d %s, want %d in the OpenAI envelope", r.Status, r.Body, status)
			}
			waitReleased(t, e, "first")
		})
	}
}
