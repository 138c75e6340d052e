package gateway_test

import (
	"net/http"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Headers a provider's Connection header nominates are hop-by-hop (RFC
// 9110 §7.6.1): like Connection itself they never reach the client, in a
// streamed answer and in a held one alike.
func TestConnectionNominatedHeadersDropped(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	sse := false // requests are sequential
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		hs := []*iop.Header{
			{Name: "connection", Value: "keep-alive, x-hop-one"},
			{Name: "Connection", Value: "X-Hop-Two"},
			{Name: "X-Hop-One", Value: "1"}, {Name: "x-hop-two", Value: "2"}, {Name: "X-Kept", Value: "3"},
		}
		if sse {
			hs = append(hs, &iop.Header{Name: "Content-Type", Value: "text/event-stream"})
			return []*iop.ProviderTunnelFrame{statusFrame(200, hs...), bodyFrame(sseDone), endFrame()}
		}
		return []*iop.ProviderTunnelFrame{statusFrame(200, append(hs, jsonType)...), bodyFrame(vllmChatJSON), endFrame()}
	}))
	for _, sse = range []bool{false, true} {
		r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
		if r.Status != http.StatusOK {
			t.Fatalf("sse=%v: status %d: %s", sse, r.Status, r.Body)
		}
		for _, h := range []string{"X-Hop-One", "X-Hop-Two", "Keep-Alive"} {
			if v := r.Header.Values(h); len(v) > 0 {
				t.Errorf("sse=%v: %s %q relayed, though the Connection header nominates it", sse, h, v)
			}
		}
		if r.Header.Get("X-Kept") != "3" {
			t.Errorf("sse=%v: X-Kept %q, want 3", sse, r.Header.Get("X-Kept"))
		}
	}
}
