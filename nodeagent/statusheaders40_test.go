package nodeagent

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The STATUS frame carries every end-to-end header of the provider's
// answer with its values, in their order, and none that is hop-by-hop,
// nominated by Connection, or Content-Length (the edge frames the body).
func TestStatusFrameCarriesTheAnswersHeaders40(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h["Set-Cookie"] = []string{"a=1", "b=2"}
		h.Set("X-Trace", "t-1")
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "secret")
		h.Set("Keep-Alive", "timeout=5")
		_, _ = w.Write([]byte(`{"ok":true}`)) // net/http adds Content-Length and Date
	}))
	defer up.Close()
	c := startOpenAICompatNode(t, up.URL+"/v1")
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "t-hdr", Adapter: "oa", Target: "m", Method: "POST", Path: "/chat/completions",
		Body: []byte(`{"model":"m","messages":[]}`),
	}}})
	status := envs[0].GetProviderTunnelFrame()
	if status.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		t.Fatalf("first frame %v, want STATUS", status.GetKind())
	}
	got := map[string][]string{}
	for _, hd := range status.GetHeaders() {
		got[hd.GetName()] = append(got[hd.GetName()], hd.GetValue())
	}
	want := map[string][]string{
		"Content-Type": {"application/json"},
		"Set-Cookie":   {"a=1", "b=2"},
		"X-Trace":      {"t-1"},
	}
	for name, vals := range want {
		if !slices.Equal(got[name], vals) {
			t.Errorf("%s = %q, want %q", name, got[name], vals)
		}
	}
	if len(got["Date"]) != 1 || !strings.HasSuffix(got["Date"][0], "GMT") {
		t.Errorf("Date = %q, want net/http's one date", got["Date"])
	}
	for _, name := range []string{"Connection", "X-Hop", "Keep-Alive", "Content-Length"} {
		if v, ok := got[name]; ok {
			t.Errorf("%s reached the STATUS frame (%q)", name, v)
		}
	}
	if len(got) != len(want)+1 {
		t.Errorf("STATUS headers %v: want only %v and Date", got, want)
	}
}
