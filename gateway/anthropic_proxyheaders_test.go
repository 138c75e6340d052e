package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A Messages stream tells a reverse proxy in front of the edge (nginx) not
// to buffer it, as an OpenAI stream does: a buffered stream reaches the
// client in bursts, or only at its end. Both paths: the tunnel and a run.
func TestMessagesStreamIsNotBufferedByProxies(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, contentStream("Hello", " world")...)
	})
	s := tunnelStack(t, u)
	check := func(name string, status int, h http.Header, body []byte) {
		t.Helper()
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") ||
			!strings.Contains(string(body), "event: message_stop\n") {
			t.Fatalf("%s: status %d, Content-Type %q, body %q", name, status, h.Get("Content-Type"), body)
		}
		if got := h.Get("X-Accel-Buffering"); got != "no" {
			t.Errorf("%s: X-Accel-Buffering %q, want no", name, got)
		}
	}
	r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	check("tunnel", r.Status, r.Header, r.Body)

	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "echo")))
	raw := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/messages",
		`{"model":"demo","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x y"}]}`, nil)
	check("run", raw.Status, raw.Header, raw.Body)
}
