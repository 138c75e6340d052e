package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An upstream error body the edge rewrites into the OpenAI envelope is
// sent as plain JSON: the upstream's Content-Encoding no longer describes
// it, and a client that honoured it would fail to decode the envelope.
func TestNormalizedErrorDropsContentEncoding(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(500, jsonType, &iop.Header{Name: "Content-Encoding", Value: "gzip"}),
			bodyFrame(`{"detail":"the engine failed"}`), endFrame()}
	}))
	// Asking for gzip itself keeps the client's transport from decoding
	// (and hiding) the header.
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Accept-Encoding": "gzip"})
	if ce := r.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("Content-Encoding %q on the normalized envelope", ce)
	}
	assertError(t, r, http.StatusInternalServerError, "upstream_error")
	if !strings.Contains(string(r.Body), "the engine failed") {
		t.Errorf("body %s", r.Body)
	}
	waitReleased(t, e, "vllm-main")
}

// A node that breaks the tunnel's frame order (a second STATUS frame) is
// answered 502 and never failed over: the node is broken, not the backend
// busy, and another candidate would not make its answer trustworthy.
func TestOutOfOrderTunnelFrameDoesNotFailOver(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Nodes[0].Providers = append(cfg.Nodes[0].Providers, vllmProvider("vllm-b", cfg.Nodes[0].Providers[0].BaseURL))
	cfg.Models = append(cfg.Models, config.ModelSpec{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "vllm-main", Target: target}, {Node: nodeID, Provider: "vllm-b", Target: target}}})
	e := startEdge(t, cfg)
	n := startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, jsonType), bodyFrame(`{"id":`), statusFrame(200, jsonType), bodyFrame(vllmChatJSON), endFrame()}
	}))
	r := post(t, e, "/v1/chat/completions", chatM)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	if !strings.Contains(string(r.Body), "out of order") {
		t.Errorf("body %s", r.Body)
	}
	for _, why := range []string{"node_lost", "unavailable", "at_capacity"} {
		if got := failovers(t, e, why); got != 0 {
			t.Errorf("%s failovers %v, want 0", why, got)
		}
	}
	n.nextRequest(t)
	select {
	case env := <-n.got:
		t.Errorf("a second request reached the node: %v", env)
	default:
	}
	waitReleased(t, e, "vllm-main")
	waitReleased(t, e, "vllm-b")
}

// A stream whose lines end in CRLF (allowed by the SSE grammar) ends with
// "data: [DONE]\r\n": the client has its whole answer there, so a node
// that then drops the exchange without its END adds no error event after
// [DONE] and the request is not counted as failed.
func TestCRLFDoneEndsStream(t *testing.T) {
	const events = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n"
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		// No END: the node half-closes right after [DONE].
		return []*iop.ProviderTunnelFrame{statusFrame(200, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}), bodyFrame(events)}
	}))
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || string(r.Body) != events {
		t.Errorf("%d %q, want the stream as sent and nothing after [DONE]", r.Status, r.Body)
	}
	waitReleased(t, e, "vllm-main")
	if got := metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "error"}); got != 0 {
		t.Errorf("released as error %v times, want 0", got)
	}
}
