package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/gateway"
)

// The event streams' fixed header values are slices shared by every
// response (setSSEHeaders): a write into one would reach every later
// stream. The whole edge (gin, the CORS middleware, a tunnel relaying an
// upstream's own X-Accel-Buffering and Cache-Control, a run's stream, and
// net/http writing the heads) leaves them as they were.
func TestSSEHeaderValuesSurviveTheEdge(t *testing.T) {
	want := slices.Clone(gateway.SSEHeaderValues33())
	for i := range want {
		want[i] = slices.Clone(want[i])
	}
	check := func(what string) {
		t.Helper()
		for i, got := range gateway.SSEHeaderValues33() {
			if !slices.Equal(got, want[i]) || cap(got) != 1 {
				t.Fatalf("after %s a shared header value is %q (capacity %d), want %q", what, got, cap(got), want[i])
			}
		}
	}

	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Accel-Buffering", "yes")
		w.Header().Set("Cache-Control", "private")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: " + chunk(`{"role":"assistant","content":"hi"}`, `"stop"`) + "\n\ndata: [DONE]\n\n"))
	})
	s := tunnelStack(t, u, func(c *config.Edge) { c.CORS.AllowedOrigins = []string{appOrigin} })
	for range 2 {
		r := do(t, httpClient(t), http.MethodPost, s.URL+"/v1/chat/completions",
			`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Origin": appOrigin})
		if r.Status != http.StatusOK || r.Header.Get("X-Accel-Buffering") != "no" || r.Header.Get("Access-Control-Allow-Origin") != appOrigin {
			t.Fatalf("tunnel stream: %d, X-Accel-Buffering %q, Access-Control-Allow-Origin %q: %s",
				r.Status, r.Header.Get("X-Accel-Buffering"), r.Header.Get("Access-Control-Allow-Origin"), r.Body)
		}
	}
	check("tunnel streams")

	e := corsStack(t, appOrigin)
	for range 2 {
		r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", "hi", true),
			map[string]string{"Origin": appOrigin, "Authorization": "Bearer sk-app"})
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" || r.Header.Get("Access-Control-Allow-Origin") != appOrigin {
			t.Fatalf("run stream: %d, Content-Type %q, Access-Control-Allow-Origin %q: %s",
				r.Status, r.Header.Get("Content-Type"), r.Header.Get("Access-Control-Allow-Origin"), r.Body)
		}
	}
	check("run streams")
}
