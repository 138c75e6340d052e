package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that sends more after its terminal (broken, or hostile) and is
// then fenced with the answer unread still ended its work at the terminal:
// the lease returns with the first terminal's reason, not node_lost, and
// the holder reads up to that terminal and no further.
func TestFenceAfterFramesPastTheTerminalTakesTheFirstTerminal(t *testing.T) {
	delta := runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA)
	for _, tc := range []struct {
		name  string
		tun   bool
		envs  []*iop.Envelope
		want  ReleaseReason
		reads int
	}{
		{"run complete then a delta", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_START), delta, runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE), delta}, ReasonCompleted, 3},
		{"run error then complete", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_ERROR), runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE)}, ReasonError, 1},
		{"tunnel end then a body", true, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")}),
		}, ReasonCompleted, 2},
		// A frame of no exchange before the terminal fails the holder's
		// read there: the terminal behind it is never reached.
		{"run foreign frame before complete", false, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY}),
			runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE),
		}, ReasonNodeLost, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
			n := startWireNode(t, f, answerWholeThenGo(tc.envs...))
			l := mustAcquire(t, f.d, Request{Model: "m"})
			var recv func() error
			var ready func() bool
			var finish func(ReleaseReason)
			if tc.tun {
				ts, err := l.OpenTunnel(context.Background(), time.Time{}, &iop.ProviderTunnelRequest{RunId: "run_1"})
				if err != nil {
					t.Fatal(err)
				}
				recv = func() error { _, err := ts.Recv(); return err }
				ready, finish = ts.Ready, func(r ReleaseReason) { ts.Finish(l, r, "", time.Second) }
			} else {
				rs := mustOpenRun(t, l)
				recv = func() error { _, err := rs.Recv(); return err }
				ready, finish = rs.Ready, func(r ReleaseReason) { rs.Finish(l, r, "", time.Second) }
			}
			// The answer arrived in one piece: the edge holds all of it.
			waitFor(t, "the answer at the edge", ready)
			_ = n.cc.Close()
			waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
			if _, reason := l.Released(); reason != tc.want {
				t.Fatalf("fenced with the answer unread: released as %q, want %q", reason, tc.want)
			}
			for i := range tc.reads {
				if err := recv(); err != nil {
					t.Fatalf("read %d after the fence: %v", i, err)
				}
			}
			err := recv()
			if tc.want == ReasonNodeLost {
				if !errors.Is(err, ErrNodeLost) {
					t.Fatalf("at the foreign frame: %v, want ErrNodeLost", err)
				}
			} else if !errors.Is(err, ErrStreamEnded) {
				t.Fatalf("after the terminal: %v, want ErrStreamEnded", err)
			}
			finish(tc.want)
			if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", tc.want)); got != 1 {
				t.Fatalf("iop_lease_released_total{reason=%s} = %v, want 1", tc.want, got)
			}
		})
	}
}
