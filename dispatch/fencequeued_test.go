package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// answerWholeThenGo answers the exchange with envs in one write (so the
// edge holds all of them, or none, at any moment) and waits until ctx
// ends; the test drops the node's session once the edge holds them.
func answerWholeThenGo(envs ...*iop.Envelope) func(*wireNode, context.Context, *nodewire.Stream, *iop.Envelope) {
	return func(_ *wireNode, ctx context.Context, st *nodewire.Stream, _ *iop.Envelope) {
		for _, env := range envs {
			if err := st.Queue(env); err != nil {
				return
			}
		}
		if err := st.Flush(); err != nil {
			return
		}
		<-ctx.Done()
	}
}

func tunnelEnv(f *iop.ProviderTunnelFrame) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}}
}

// A node that answered a run whole and then went (a drained node
// stopping, a crash just after its answer) is fenced while the holder has
// not read the terminal yet (it is still relaying what came before): the
// lease returns with the terminal's reason, not node_lost, and the holder
// still reads every event.
func TestFenceWithQueuedTerminalTakesItsReason(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tun   bool
		envs  []*iop.Envelope
		want  ReleaseReason
		reads int
	}{
		{"run complete", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_START), runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA), runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE)}, ReasonCompleted, 3},
		{"run error", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_ERROR)}, ReasonError, 1},
		{"run cancelled", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA), runEnv(iop.RunEventType_RUN_EVENT_TYPE_CANCELLED)}, ReasonCancelled, 2},
		{"run cut before its terminal", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_START), runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA)}, ReasonNodeLost, 2},
		{"tunnel end", true, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}),
		}, ReasonCompleted, 3},
		{"tunnel error cancelled", true, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CANCELLED}}),
		}, ReasonCancelled, 1},
		{"tunnel cut after a body", true, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")}),
		}, ReasonNodeLost, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fenceWholeAnswer(t, tc.tun, tc.envs, tc.want, tc.reads)
			for _, r := range []ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError, ReasonNodeLost} {
				want := 0.0
				if r == tc.want {
					want = 1
				}
				if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", r)); got != want {
					t.Fatalf("iop_lease_released_total{reason=%s} = %v, want %v", r, got, want)
				}
			}
		})
	}
}

// fenceWholeAnswer has a node answer an exchange (a tunnel if tun) with
// envs in one write, fences the node once the edge holds them all, and
// checks the lease was released as want, that the holder then reads
// reads frames, and that its next read ends (ErrStreamEnded after a
// terminal; ErrNodeLost where no terminal was reached). It finishes the
// exchange with want and returns the fixture for the metrics.
func fenceWholeAnswer(t *testing.T, tun bool, envs []*iop.Envelope, want ReleaseReason, reads int) *fixture {
	t.Helper()
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, answerWholeThenGo(envs...))
	l := mustAcquire(t, f.d, Request{Model: "m"})
	var recv func() error
	var ready func() bool
	var finish func(ReleaseReason)
	if tun {
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
	if _, reason := l.Released(); reason != want {
		t.Fatalf("fenced with the answer unread: released as %q, want %q", reason, want)
	}
	for i := range reads {
		if err := recv(); err != nil {
			t.Fatalf("read %d after the fence: %v", i, err)
		}
	}
	err := recv()
	if want == ReasonNodeLost {
		if !errors.Is(err, ErrNodeLost) {
			t.Fatalf("where no terminal was reached: %v, want ErrNodeLost", err)
		}
	} else if !errors.Is(err, ErrStreamEnded) {
		t.Fatalf("after the terminal: %v, want ErrStreamEnded", err)
	}
	finish(want)
	return f
}
