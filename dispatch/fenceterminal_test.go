package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The node's session ends (a drained node stops) after the edge has read
// the exchange's terminal but before the holder's Finish: the fence
// returns the lease with the reason the terminal says, not node_lost (the
// answer, or the node's own error, arrived whole). The holder's later
// Finish changes nothing.
func TestFenceBetweenTerminalAndFinishKeepsTerminalsReason(t *testing.T) {
	tunnelFrameEnv := func(f *iop.ProviderTunnelFrame) *iop.Envelope {
		return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}}
	}
	for _, tc := range []struct {
		name     string
		tunnel   bool
		terminal *iop.Envelope
		want     ReleaseReason
	}{
		{"run complete", false, runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE), ReasonCompleted},
		{"run error", false, runEnv(iop.RunEventType_RUN_EVENT_TYPE_ERROR), ReasonError},
		{"run cancelled", false, runEnv(iop.RunEventType_RUN_EVENT_TYPE_CANCELLED), ReasonCancelled},
		{"tunnel end", true, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}), ReasonCompleted},
		{"tunnel legacy end", true, tunnelFrameEnv(&iop.ProviderTunnelFrame{End: true}), ReasonCompleted},
		{"tunnel error", true, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true}), ReasonError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
			stopNode := make(chan struct{})
			var n *wireNode
			n = startWireNode(t, f, func(_ *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
				_ = st.Send(tc.terminal)
				select {
				case <-stopNode:
					_ = n.cc.Close() // the node stops, as a drained one does
				case <-ctx.Done():
				}
			})
			l := mustAcquire(t, f.d, Request{Model: "m"})
			var recv func() error
			var finish func()
			if tc.tunnel {
				ts, err := l.OpenTunnel(context.Background(), time.Time{}, &iop.ProviderTunnelRequest{RunId: "run_1"})
				if err != nil {
					t.Fatal(err)
				}
				recv = func() error { _, err := ts.Recv(); return err }
				finish = func() { ts.Finish(l, ReasonCompleted, "", time.Second) }
			} else {
				rs := mustOpenRun(t, l)
				recv = func() error { _, err := rs.Recv(); return err }
				finish = func() { rs.Finish(l, ReasonCompleted, "", time.Second) }
			}
			if err := recv(); err != nil {
				t.Fatalf("terminal: %v", err)
			}
			if err := recv(); !errors.Is(err, ErrStreamEnded) {
				t.Fatalf("after the terminal: %v, want ErrStreamEnded", err)
			}
			close(stopNode)
			waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
			if _, reason := l.Released(); reason != tc.want {
				t.Fatalf("fenced after the terminal: released as %q, want %q", reason, tc.want)
			}
			finish()
			if _, reason := l.Released(); reason != tc.want {
				t.Fatalf("after Finish: released as %q, want %q", reason, tc.want)
			}
			if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", ReasonNodeLost)); got != 0 {
				t.Fatalf("iop_lease_released_total{reason=node_lost} = %v, want 0", got)
			}
		})
	}
}
