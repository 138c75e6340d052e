package nodeagent

// Mutants of Cut and its terminal that the tests cannot tell apart, and
// why:
//   - stop runs its first-time work again on a later call (the "first"
//     check dropped): beginDrain is a context cancel (idempotent) and the
//     wakes are non-blocking sends, so the only difference is a repeated
//     "draining" log line.
//   - Cut logs only above a larger count: logging only.
//   - runCtx's claim refusal, or its stop after the terminal, cancels with
//     ErrNodeStopping rather than nil: nothing reads the cause of a context
//     that never ran anything, or after its terminal was written.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Cut ends every run in flight, not only the first it finds: two runs held
// on one node both end with the stopped terminal (CAPACITY_EXCEEDED), and
// Cut returns once both terminals are out.
func TestCutEndsEveryRunInFlight39m(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	defer close(h.release)
	_, a, c, st1 := heldRunning(t, h)
	st2 := openRun(t, c, "r2")
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the second run never started")
	}
	cut := make(chan error, 1)
	// Owner: the test; Cut returns once both terminals are out and the
	// edge side (readAll below) closed both streams, or at its bound.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cut <- a.Cut(ctx)
	}()
	got := make(chan []*iop.Envelope, 1)
	// Owner: the test; reads r2's stream to its end (bounded by
	// readAll's deadline).
	go func() { got <- readAll(t, st2) }()
	envs1 := readAll(t, st1)
	var envs2 []*iop.Envelope
	select {
	case envs2 = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("r2's stream never ended")
	}
	for i, envs := range [][]*iop.Envelope{envs1, envs2} {
		if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR ||
			ev.GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED {
			t.Errorf("run %d ended with %v", i+1, envs)
		}
	}
	select {
	case err := <-cut:
		if err != nil {
			t.Fatalf("Cut: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Cut did not return")
	}
	if n := a.exchanges.Load(); n != 0 {
		t.Fatalf("Cut returned with %d exchanges in flight", n)
	}
}
