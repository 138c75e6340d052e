package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A run whose node sends its START and then nothing is still bound by
// the response timeout (the first delta by then), not by the stream idle
// timeout, which applies only once a delta came (here: none at all).
func TestRunStartWithoutDeltaIsResponseTimeout(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Limits.ResponseTimeoutSec = 1
	none := 0
	cfg.Limits.StreamIdleTimeoutSec = &none
	e := startEdge(t, cfg)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetRunRequest().GetRunId()
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START, RunId: runID, Sequence: 1}}})
		silent(n, ctx, st, first)
	})
	for _, stream := range []bool{false, true} {
		r := waitFor(t, postAsync(t, e, "/v1/chat/completions", chatBody("demo", "hi", stream)), waitLong, "the answer")
		assertError(t, r, http.StatusBadGateway, "upstream_error")
		if !strings.Contains(string(r.Body), "did not answer in time") {
			t.Errorf("stream=%v: %s", stream, r.Body)
		}
	}
}

// A client that leaves a whole (non-streamed) run is counted as a
// client_disconnect, once, and its request as cancelled: the CANCELLED
// end the node sends for the edge's cancel is not the run's answer.
func TestRunClientLeftCountedOnce(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	got := make(chan struct{})
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetRunRequest().GetRunId()
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START, RunId: runID, Sequence: 1}}})
		close(got)
		if !recvUntilCancel(nil, st) {
			return
		}
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_CANCELLED, RunId: runID, Sequence: 2}}})
		_ = st.CloseWrite()
		<-ctx.Done()
	})
	hangUp, done := postInBackground(t, e.URL+"/v1/chat/completions", chatBody("demo", "hi", false))
	waitFor(t, got, waitLong, "the run at the node")
	hangUp()
	if err := waitFor(t, done, waitLong, "the client to return"); err == nil {
		t.Fatal("the request completed despite the hang-up")
	}
	waitReleased(t, e, "mock")
	counted := func(code string) float64 {
		return metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": code})
	}
	// Counted once the handler returned, after the lease.
	stack.WaitFor(t, waitLong, "the request counted", func() bool {
		mfs, err := e.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "iop_requests_total" {
				return len(mf.GetMetric()) > 0
			}
		}
		return false
	})
	if got := counted("cancelled"); got != 1 {
		t.Errorf("requests counted cancelled %v, want 1", got)
	}
	if got := cancellations(t, e, "client_disconnect"); got != 1 {
		t.Errorf("client_disconnect cancellations %v, want 1", got)
	}
}
