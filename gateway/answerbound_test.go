package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that answers a non-streamed run with text that never ends (a
// broken upstream, or a hostile node) cannot grow the edge's memory: past
// openaiapi.MaxAnswerBytes the client gets an upstream_error, the run is
// cancelled, and the lease comes back once the node has stopped.
func TestEndlessNonStreamAnswerIsBounded(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	var sent atomic.Int64
	n := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		n.record(first)
		runID := first.GetRunRequest().GetRunId()
		cancelled := make(chan struct{})
		// Owner: this handler. Stops when the stream ends or the cancel
		// arrives.
		go func() {
			if recvUntilCancel(n, st) {
				close(cancelled)
			}
		}()
		delta := strings.Repeat("x", 64<<10)
		seq := uint64(0)
		send := func(ev *iop.RunEvent) error {
			seq++
			ev.RunId, ev.Sequence = runID, seq
			return st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
		}
		if send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START}) != nil {
			return
		}
		for {
			select {
			case <-cancelled:
				_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_CANCELLED})
				_ = st.CloseWrite()
				return
			case <-ctx.Done():
				return
			default:
			}
			if send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: delta}) != nil {
				return
			}
			sent.Add(int64(len(delta)))
		}
	})
	r := post(t, e, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	if !strings.Contains(string(r.Body), "larger than 16 MiB") {
		t.Errorf("body %s", r.Body)
	}
	n.nextRequest(t)
	if c := n.nextCancel(t); c.GetReason() != "answer_too_large" {
		t.Errorf("cancel %v", c)
	}
	waitReleased(t, e, "mock")
	for _, reason := range []string{"client_disconnect", "timeout", "write_error"} {
		if got := cancellations(t, e, reason); got != 0 {
			t.Errorf("%s cancellations %v, want 0", reason, got)
		}
	}
	t.Logf("the node sent %d MiB before the cancel", sent.Load()>>20)
}
