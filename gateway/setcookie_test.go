package gateway_test

import (
	"net/http"
	"testing"
)

// An upstream's cookies never reach the client: they would be set on the
// edge's domain.
func TestTunnelDropsUpstreamCookies(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "upstream_session", Value: "abc"})
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	s := tunnelStack(t, u)
	for _, stream := range []bool{false, true} {
		r := post(t, s.Edge, "/v1/chat/completions", chatBody("qwen-7b", "hi", stream))
		if r.Status != http.StatusOK || r.Header.Get("Set-Cookie") != "" {
			t.Errorf("stream=%v: %d, Set-Cookie %q", stream, r.Status, r.Header.Get("Set-Cookie"))
		}
	}
}
