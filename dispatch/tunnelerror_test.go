package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnel ERROR frame ends the exchange as an END frame does: the next
// Recv answers ErrStreamEnded at once rather than waiting on the node for
// a frame that never comes (nor does Finish cancel a run that is over).
func TestTunnelErrorFrameEndsStream(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	startWireNode(t, f, func(n *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
			Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR,
		}}})
		<-ctx.Done() // the stream stays open: only the frame says it is over
	})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	defer l.Release(ReasonError)
	ts, err := l.OpenTunnel(context.Background(), time.Time{}, &iop.ProviderTunnelRequest{RunId: "run_1", Method: "POST", Path: "/chat/completions"})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if fr, err := ts.Recv(); err != nil || fr.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR {
		t.Fatalf("first frame %v %v, want the ERROR frame", fr, err)
	}
	if _, err := ts.RecvBy(time.Now().Add(5 * time.Second)); !errors.Is(err, ErrStreamEnded) {
		t.Fatalf("recv after the ERROR frame: %v, want ErrStreamEnded", err)
	}
}
