package nodeagent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Cut ends a run in flight with a terminal that says the node stopped and
// that another candidate may serve it (CAPACITY_EXCEEDED), not with the
// adapter's cancelled error, and returns once that terminal is out; work
// that comes after is refused as during a drain.
func TestCutEndsRunsWithStoppedTerminal(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	defer close(h.release)
	_, a, c, st := heldRunning(t, h)
	cut := make(chan error, 1)
	// Owner: the test; Cut returns once the run's terminal is out and the
	// edge side (readAll below) has closed the stream, or at its bound.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cut <- a.Cut(ctx)
	}()
	envs := readAll(t, st)
	select {
	case err := <-cut:
		if err != nil {
			t.Fatalf("Cut: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Cut did not return")
	}
	if a.exchanges.Load() != 0 {
		t.Fatalf("Cut returned with %d exchanges in flight", a.exchanges.Load())
	}
	ev := terminal(envs)
	if ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED ||
		!strings.Contains(ev.GetError().GetMessage(), "shutting down") {
		t.Fatalf("the cut run ended with %v", envs)
	}
	if !a.Draining() {
		t.Fatal("not draining after Cut")
	}
	refused := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r2", Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("hi"),
	}}})
	if ev := terminal(refused); ev.GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED || runs.Load() != 1 {
		t.Fatalf("run after Cut: %v (adapter ran %d times)", refused, runs.Load())
	}
}

// A run claimed after Cut took its list (admitted just before the node
// stopped taking work) is cut at once; an edge's CANCEL_RUN cancels with
// no such cause (the run ends CANCELLED, as before).
func TestClaimAfterCutIsCut(t *testing.T) {
	a := heldAgent(t, heldInstance{})
	var first, late error
	if !a.claimRun("before", func(cause error) { first = cause }) {
		t.Fatal("claim refused")
	}
	a.cancelRun("before")
	if first != nil {
		t.Fatalf("CANCEL_RUN's cause: %v, want nil (context.Canceled)", first)
	}
	if err := a.Cut(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !a.claimRun("after", func(cause error) { late = cause }) || !errors.Is(late, ErrNodeStopping) {
		t.Fatalf("a run claimed after Cut: cause %v", late)
	}
}
