package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A client that stops reading a streamed run is cut off by
// limits.write_timeout_sec: counted as write_error and the run cancelled
// at the node, never taken for a completed run.
func TestRunStreamWriteTimeoutCancelsRun(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Limits.WriteTimeoutSec = 1
	e := startEdge(t, cfg)
	n := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetRunRequest().GetRunId()
		cancelled := make(chan struct{})
		go func() { // Owner: this node handler; stops when the stream ends.
			defer close(cancelled)
			recvUntilCancel(n, st)
		}()
		seq := uint64(0)
		send := func(ev *iop.RunEvent) error {
			seq++
			ev.RunId, ev.Sequence = runID, seq
			return st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
		}
		_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START})
		delta := strings.Repeat("x", 64<<10)
		// Deltas until the edge cancels (or the window it stops granting
		// fails the send when the stream is reset).
		for {
			select {
			case <-cancelled:
				_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_CANCELLED})
				_ = st.CloseWrite()
				<-ctx.Done()
				return
			default:
			}
			if send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: delta}) != nil {
				return
			}
		}
	})

	a := stalledClient(t, e.URL, "/v1/chat/completions", "", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer a.Close()
	// The run is cancelled at the node. Its reason may be the watch's
	// client_disconnect: net/http cancels the request once a write failed,
	// and the watch can see that before the failed write returns
	// (writeFailed); the count below is write_error either way.
	if c := n.nextCancel(t); c.GetReason() != "write_error" && c.GetReason() != "client_disconnect" {
		t.Errorf("CancelRequest reason %q, want write_error", c.GetReason())
	}
	stack.WaitFor(t, waitLong, "the lease to return", func() bool { return inFlight(e, "mock") == 0 })
	if got := cancellations(t, e, "write_error"); got != 1 {
		t.Errorf("write_error cancellations = %v, want 1", got)
	}
}
