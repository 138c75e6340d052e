package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnelled answer whose node reported usage and then failed before
// the first byte reached the client moves to the next candidate; the
// tokens the first provider reported are counted once, not again by a
// second attempt that reports none of its own.
func TestFailoverCountsEachAttemptsUsageOnce(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("first", "http://"+closedPort(t)+"/v1"), vllmProvider("second", "http://"+closedPort(t)+"/v1")})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "first", Target: target}, {Node: nodeID, Provider: "second", Target: target}}}}
	e := startEdge(t, cfg)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		req := first.GetProviderTunnelRequest()
		runID := req.GetRunId()
		seq := uint64(0)
		send := func(f *iop.ProviderTunnelFrame) {
			seq++
			f.Sequence, f.RunId = seq, runID
			_ = st.Send(tunnelFrameEnv(f))
		}
		send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: http.StatusOK,
			Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}}})
		if req.GetAdapter() == "first" {
			// Usage, then the backend fails before its answer is whole.
			send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte(`{"id":"chatcmpl-1",`)})
			send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE,
				Usage: &iop.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}})
			send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR,
				Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "backend went away", HttpStatus: http.StatusBadGateway}})
			return
		}
		send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte(vllmChatJSON)})
		send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END})
	})
	r := post(t, e, "/v1/chat/completions", chatM)
	if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if got := failovers(t, e, "unavailable"); got != 1 {
		t.Fatalf("failovers %v, want 1", got)
	}
	waitReleased(t, e, "first")
	waitReleased(t, e, "second")
	for kind, want := range map[string]float64{"prompt": 10, "completion": 5} {
		if got := metric(t, e.Registry, "iop_tokens_total", map[string]string{"model": "m", "kind": kind}); got != want {
			t.Errorf("iop_tokens_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}
}
