package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that drops its session as soon as the edge closes a finished
// exchange (a draining node stops then) can be fenced before the holder's
// Release runs. The lease still returns with the holder's reason, not
// node_lost: the work was done and its answer delivered.
func TestFenceAfterFinishedExchangeKeepsHoldersReason(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	var n *wireNode
	n = startWireNode(t, f, func(_ *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE))
		for {
			if _, err := st.Recv(); err != nil {
				break // the edge closed the finished exchange
			}
		}
		_ = n.cc.Close() // and the node stops, as a drained one does
	})
	fenced := make(chan struct{})
	afterFinishClose = func(l *Lease) {
		// Hold the holder's Release until the fence has returned the
		// lease.
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

	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs, err := l.OpenRun(context.Background(), time.Time{}, runReq())
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := rs.Recv(); err != nil || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("terminal %v %v", ev, err)
	}
	rs.Finish(l, ReasonCompleted, "", time.Second)
	select {
	case <-fenced:
	default:
		t.Fatal("the node was not fenced before the holder's release")
	}
	if _, reason := l.Released(); reason != ReasonCompleted {
		t.Fatalf("a finished exchange's lease returned as %q by the fence, want %q", reason, ReasonCompleted)
	}
}
