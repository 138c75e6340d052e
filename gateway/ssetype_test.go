package gateway_test

import (
	"net/http"
	"testing"
)

// A media type's name is case-insensitive (RFC 9110 §8.3.1): an upstream
// that names its event stream "Text/Event-Stream" is relayed as one
// (unbuffered by proxies in front of the edge).
func TestTunnelEventStreamTypeAnyCase(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/Event-Stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: " + chunk(`{"role":"assistant","content":"hi"}`, `"stop"`) + "\n\ndata: [DONE]\n\n"))
	})
	s := tunnelStack(t, u)
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || r.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("%d, X-Accel-Buffering %q: %s", r.Status, r.Header.Get("X-Accel-Buffering"), r.Body)
	}
}
