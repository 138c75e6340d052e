package dispatch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// holdReleaseUntilFenced sets afterFinishClose to hold the holder's
// Release until the fence has returned the lease (the node drops its
// session as soon as the edge closes the exchange), and reports on the
// returned channel that it did.
func holdReleaseUntilFenced(t *testing.T) <-chan struct{} {
	fenced := make(chan struct{})
	afterFinishClose = func(l *Lease) {
		deadline := time.Now().Add(waitDeadline)
		for time.Now().Before(deadline) {
			if rel, _ := l.Released(); rel {
				close(fenced)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Cleanup(func() { afterFinishClose = nil })
	return fenced
}

// stopAfterEdgeClose reads st until the edge closes it, then drops the
// node's session, as a drained node does once its last work is over.
func stopAfterEdgeClose(n *wireNode, st *nodewire.Stream) {
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	_ = n.cc.Close()
}

// finishCompleteRunFenced opens a run on a node that answers COMPLETE and
// stops once the edge closes the exchange, reads the terminal and
// finishes the run with reason; it fails unless the fence came before the
// holder's Release. It returns the run's lease.
func finishCompleteRunFenced(t *testing.T, reason ReleaseReason) *Lease {
	t.Helper()
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	var n *wireNode
	n = startWireNode(t, f, func(_ *wireNode, _ context.Context, st *nodewire.Stream, _ *iop.Envelope) {
		_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE))
		stopAfterEdgeClose(n, st)
	})
	fenced := holdReleaseUntilFenced(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs := mustOpenRun(t, l)
	if ev, err := rs.Recv(); err != nil || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("terminal %v %v", ev, err)
	}
	rs.Finish(l, reason, "", time.Second)
	select {
	case <-fenced:
	default:
		t.Fatal("the node was not fenced before the holder's release")
	}
	return l
}

// A tunnel's terminal says how the exchange ended, as the relay reads it
// (by its kind): an ERROR frame whose code says the node cancelled the
// run ends it as cancelled, an END frame as completed even if it carries
// an error. A fence before the holder's Finish returns the lease so.
func TestFenceAfterTunnelTerminalTakesItsKind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame *iop.ProviderTunnelFrame
		want  ReleaseReason
	}{
		{"error cancelled", &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true,
			Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CANCELLED}}, ReasonCancelled},
		{"legacy end cancelled", &iop.ProviderTunnelFrame{End: true,
			Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CANCELLED}}, ReasonCancelled},
		{"end with an error", &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true,
			Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM}}, ReasonCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
			stop := make(chan struct{})
			var n *wireNode
			n = startWireNode(t, f, func(_ *wireNode, ctx context.Context, st *nodewire.Stream, _ *iop.Envelope) {
				_ = st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: tc.frame}})
				select {
				case <-stop:
					_ = n.cc.Close()
				case <-ctx.Done():
				}
			})
			l := mustAcquire(t, f.d, Request{Model: "m"})
			ts, err := l.OpenTunnel(context.Background(), time.Time{}, &iop.ProviderTunnelRequest{RunId: "run_1"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ts.Recv(); err != nil {
				t.Fatalf("terminal: %v", err)
			}
			if _, err := ts.Recv(); !errors.Is(err, ErrStreamEnded) {
				t.Fatalf("after the terminal: %v, want ErrStreamEnded", err)
			}
			close(stop)
			waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
			if _, reason := l.Released(); reason != tc.want {
				t.Fatalf("fenced after the terminal: released as %q, want %q", reason, tc.want)
			}
			ts.Close()
		})
	}
}

// The holder's own reason replaces the one its terminal recorded before
// the exchange is closed: a run whose COMPLETE came after the client went
// away is released as cancelled, even when the node stops at the close
// and its fence comes before the holder's Release.
func TestFenceDuringFinishTakesHoldersReasonOverTerminals(t *testing.T) {
	l := finishCompleteRunFenced(t, ReasonCancelled)
	if _, reason := l.Released(); reason != ReasonCancelled {
		t.Fatalf("released as %q by the fence, want the holder's %q", reason, ReasonCancelled)
	}
}

// An exchange the holder abandons before its terminal is cancelled and
// drained in the background; the node's CANCELLED answer arrives, and the
// holder's reason (error) is what the lease returns with, even when the
// node stops at the close and its fence comes before the Release.
func TestFenceAfterBackgroundDrainTakesHoldersReason(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	var n *wireNode
	n = startWireNode(t, f, func(_ *wireNode, _ context.Context, st *nodewire.Stream, _ *iop.Envelope) {
		if env, err := st.Recv(); err != nil || env.GetCancelRequest() == nil {
			return
		}
		_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_CANCELLED))
		stopAfterEdgeClose(n, st)
	})
	fenced := holdReleaseUntilFenced(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs := mustOpenRun(t, l)
	rs.Finish(l, ReasonError, "", waitDeadline)
	select {
	case <-fenced:
	case <-time.After(2 * waitDeadline):
		t.Fatal("the background drain never released the lease")
	}
	waitFor(t, "the release", func() bool { rel, _ := l.Released(); return rel })
	if _, reason := l.Released(); reason != ReasonError {
		t.Fatalf("released as %q by the fence, want the holder's %q", reason, ReasonError)
	}
}

// A cancelled exchange drained by its holder (Stream.Drain) has ended:
// a fence after the node's CANCELLED answer returns the lease as
// cancelled, not node_lost.
func TestFenceAfterDrainTakesCancelled(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	stop := make(chan struct{})
	var n *wireNode
	n = startWireNode(t, f, func(_ *wireNode, ctx context.Context, st *nodewire.Stream, _ *iop.Envelope) {
		if env, err := st.Recv(); err != nil || env.GetCancelRequest() == nil {
			return
		}
		_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_CANCELLED))
		select {
		case <-stop:
			_ = n.cc.Close()
		case <-ctx.Done():
		}
	})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs := mustOpenRun(t, l)
	rs.Cancel("client_disconnect")
	if !rs.Drain(waitDeadline) {
		t.Fatal("the node's CANCELLED answer was not drained")
	}
	close(stop)
	waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
	if _, reason := l.Released(); reason != ReasonCancelled {
		t.Fatalf("fenced after a drained cancellation: released as %q, want %q", reason, ReasonCancelled)
	}
	rs.Close()
}

// What an earlier exchange on a lease recorded at its terminal does not
// describe the next one: a node lost in the middle of the second
// exchange returns the lease as node_lost, not as the first one's error.
func TestSecondExchangeOnLeaseStartsUnsettled(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	var streams atomic.Int32
	second, stop := make(chan struct{}), make(chan struct{})
	var n *wireNode
	n = startWireNode(t, f, func(_ *wireNode, ctx context.Context, st *nodewire.Stream, _ *iop.Envelope) {
		if streams.Add(1) == 1 {
			_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_ERROR))
			<-ctx.Done()
			return
		}
		close(second)
		select {
		case <-stop:
			_ = n.cc.Close() // lost in the middle of the second exchange
		case <-ctx.Done():
		}
	})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs := mustOpenRun(t, l)
	if ev, err := rs.Recv(); err != nil || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR {
		t.Fatalf("first exchange's terminal %v %v", ev, err)
	}
	rs.Close()
	rs2, err := l.OpenRun(context.Background(), time.Time{}, runReq())
	if err != nil {
		t.Fatal(err)
	}
	defer rs2.Close()
	select {
	case <-second:
	case <-time.After(waitDeadline):
		t.Fatal("the node never received the second exchange")
	}
	close(stop)
	waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
	if _, reason := l.Released(); reason != ReasonNodeLost {
		t.Fatalf("fenced in the middle of the second exchange: released as %q, want %q", reason, ReasonNodeLost)
	}
}
