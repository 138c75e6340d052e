package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A client that hangs up while its whole (held) tunnelled answer is still
// coming is a client_disconnect, counted once, even when the node's END
// arrives after the edge cancelled: that END is the cancelled exchange's,
// not an answer anybody received (as on the run path).
func TestHeldAnswerEndAfterClientLeftIsCancelled(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	bodySent := make(chan struct{})
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetProviderTunnelRequest().GetRunId()
		_ = st.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, RunId: runID, StatusCode: http.StatusOK,
			Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}}}))
		_ = st.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, RunId: runID,
			Body: []byte(vllmChatJSON)}))
		close(bodySent)
		// The answer ends only once the edge has cancelled it.
		if !recvUntilCancel(nil, st) {
			return
		}
		_ = st.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 3, RunId: runID}))
		<-ctx.Done()
	})
	hangUp, done := postInBackground(t, e.URL+"/v1/chat/completions", chatBody("qwen-7b", "hi", false))
	waitFor(t, bodySent, waitLong, "the node to send the body")
	hangUp()
	if err := waitFor(t, done, waitLong, "the client to return"); err == nil {
		t.Fatal("the request completed despite the hang-up")
	}
	waitReleased(t, e, "vllm-main")
	counted := func(code string) float64 {
		return metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": code})
	}
	// Counted after the handler returned, which is after the lease.
	stack.WaitFor(t, waitLong, "the request counted", func() bool { return counted("cancelled")+counted("200") == 1 })
	if got := counted("cancelled"); got != 1 {
		t.Errorf("requests counted cancelled %v (200: %v), want 1", got, counted("200"))
	}
	if got := cancellations(t, e, "client_disconnect"); got != 1 {
		t.Errorf("client_disconnect cancellations %v, want 1", got)
	}
}
