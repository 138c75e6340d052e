package nodeagent

import (
	"net/http"
	"net/http/httptest"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// droppedStatusHeader keeps hop-by-hop headers and Content-Length off the
// STATUS frame whatever the adapter filtered before: the sink is the last
// step before the wire, in any spelling of the name.
func TestDroppedStatusHeader41m(t *testing.T) {
	for _, name := range append([]string{"Content-Length", "content-length", "connection", "TRANSFER-ENCODING"}, hopByHop...) {
		if !droppedStatusHeader(name) {
			t.Errorf("%q reaches the STATUS frame", name)
		}
	}
	for _, name := range []string{"Content-Type", "Date", "Set-Cookie", "X-Request-Id", "Content-Encoding", "Retry-After"} {
		if droppedStatusHeader(name) {
			t.Errorf("%q is kept off the STATUS frame", name)
		}
	}
}

// An answer with a single end-to-end header still carries it: the block
// the headers are allocated in is sized by their count, one included.
func TestStatusFrameWithOneHeader41m(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Date"] = nil         // net/http adds none
		h["Content-Type"] = nil // nor sniffs one
		h.Set("X-Only", "one")
		_, _ = w.Write([]byte(`{"ok":true}`)) // Content-Length, dropped
	}))
	defer up.Close()
	c := startOpenAICompatNode(t, up.URL+"/v1")
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "t-one", Adapter: "oa", Target: "m", Method: "POST", Path: "/chat/completions",
		Body: []byte(`{"model":"m","messages":[]}`),
	}}})
	status := envs[0].GetProviderTunnelFrame()
	if status.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		t.Fatalf("first frame %v, want STATUS", status.GetKind())
	}
	hs := status.GetHeaders()
	if len(hs) != 1 || hs[0].GetName() != "X-Only" || hs[0].GetValue() != "one" {
		t.Fatalf("STATUS headers %v, want X-Only: one alone", hs)
	}
}
