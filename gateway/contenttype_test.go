package gateway_test

import (
	"net/http"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Content-Type is a singleton field (RFC 9110 §8.3): a node relaying two
// of them sends the client one, the first, and the edge treats the answer
// as that one type. Before, both reached the client (an SDK that joins
// repeated fields read "application/json, text/event-stream"), and the
// second made a whole JSON answer an event stream, relayed unheld,
// without its Content-Length.
func TestTunnelOneContentType(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, jsonType, &iop.Header{Name: "content-type", Value: "text/event-stream"}),
			bodyFrame(vllmChatJSON), endFrame()}
	}))
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON {
		t.Fatalf("status %d, body %s", r.Status, r.Body)
	}
	if ct := r.Header.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" {
		t.Errorf("Content-Type %q, want only application/json", ct)
	}
	if cl := r.Header.Get("Content-Length"); cl == "" {
		t.Error("the whole JSON answer was not held (no Content-Length)")
	}
	waitReleased(t, e, "vllm-main")
}
