package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A provider's headers reach the client with every value of a repeated
// name, in order, and none written over by another name's: the edge keeps
// the values of the names it copies in one block (copyHeaders), and a name
// met again, or one the edge had already set (CORS's Vary), must grow its
// own list, not the block. Both a held and a streamed answer.
func TestRepeatedProviderHeadersKeepEveryValue41(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.CORS.AllowedOrigins = []string{"https://app.example"}
	e := startEdge(t, cfg)
	sse := false // requests are sequential
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		hs := []*iop.Header{
			{Name: "X-A", Value: "a1"}, {Name: "X-B", Value: "b1"}, {Name: "x-a", Value: "a2"},
			{Name: "X-C", Value: "c1"}, {Name: "Vary", Value: "Accept-Encoding"}, {Name: "X-A", Value: "a3"},
		}
		if sse {
			hs = append(hs, &iop.Header{Name: "Content-Type", Value: "text/event-stream"})
			return []*iop.ProviderTunnelFrame{statusFrame(200, hs...), bodyFrame(sseDone), endFrame()}
		}
		return []*iop.ProviderTunnelFrame{statusFrame(200, append(hs, jsonType)...), bodyFrame(vllmChatJSON), endFrame()}
	}))
	for _, sse = range []bool{false, true} {
		r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions",
			`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Origin": "https://app.example"})
		if r.Status != http.StatusOK {
			t.Fatalf("sse=%v: status %d: %s", sse, r.Status, r.Body)
		}
		for name, want := range map[string][]string{
			"X-A": {"a1", "a2", "a3"}, "X-B": {"b1"}, "X-C": {"c1"}, "Vary": {"Origin", "Accept-Encoding"},
		} {
			if got := r.Header.Values(name); !slices.Equal(got, want) {
				t.Errorf("sse=%v: %s %q, want %q", sse, name, got, want)
			}
		}
	}
}
