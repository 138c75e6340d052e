package gateway_test

import (
	"net/http"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that sends two Content-Type headers, the first not fit to relay
// (a control character in its value): the edge judges the answer by the
// one it relays, so the client never gets an event stream treated as a
// whole body or a JSON body treated as an event stream.
func TestTunnelTwoContentTypesJudgedByTheRelayedOne(t *testing.T) {
	var headers []*iop.Header
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, headers...), bodyFrame(vllmChatJSON), endFrame()}
	}))

	headers = []*iop.Header{{Name: "Content-Type", Value: "application/json\x01"}, {Name: "Content-Type", Value: "text/event-stream"}}
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" || r.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("event stream after an unfit JSON type: %d, Content-Type %q, X-Accel-Buffering %q", r.Status, r.Header.Get("Content-Type"), r.Header.Get("X-Accel-Buffering"))
	}

	headers = []*iop.Header{{Name: "Content-Type", Value: "text/event-stream\x01"}, {Name: "Content-Type", Value: "application/json"}}
	r = post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Accel-Buffering") != "" || string(r.Body) != vllmChatJSON {
		t.Errorf("JSON after an unfit event-stream type: %d, Content-Type %q, X-Accel-Buffering %q, body %.100s", r.Status, r.Header.Get("Content-Type"), r.Header.Get("X-Accel-Buffering"), r.Body)
	}
	waitReleased(t, e, "vllm-main")
}
