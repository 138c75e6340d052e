package nodeagent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Drain may be called by more than one waiter (a signal handler and a
// test harness, say): each returns when the work in flight has ended, not
// only the first to be woken.
func TestConcurrentDrainsAllReturn(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	le := startLoadEdge(t, heldPayload())
	a := heldAgent(t, h)
	c := startNode(t, le.fakeEdge, a)
	st := openRun(t, c, "r1")
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never started")
	}
	const waiters = 3
	waiting := make(chan struct{}, waiters)
	drainWaitsHook = func() { waiting <- struct{}{} }
	t.Cleanup(func() { drainWaitsHook = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drained := make(chan error, waiters)
	for range waiters {
		// Owner: the test; each returns when r1 ends or at ctx's bound.
		go func() { drained <- a.Drain(ctx) }()
	}
	for range waiters {
		<-waiting // every waiter waits for r1 to end
	}
	close(h.release)
	readAll(t, st)
	for range waiters {
		if err := <-drained; err != nil {
			t.Fatalf("a Drain waiting beside another: %v", err)
		}
	}
}

// Work that ended before the drain began does not count as the drain's
// end: with one run done and another in flight, Drain waits for the
// second (here, to its bound).
func TestDrainWaitsAfterEarlierRunsEnded(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{}, 4)}
	le := startLoadEdge(t, heldPayload())
	a := heldAgent(t, h)
	c := startNode(t, le.fakeEdge, a)
	st := openRun(t, c, "r1")
	<-h.started
	h.release <- struct{}{}
	readAll(t, st)
	for a.exchanges.Load() != 0 {
		time.Sleep(time.Millisecond) // r1 leaves once the edge's close reaches the node
	}
	st2 := openRun(t, c, "r2")
	<-h.started
	defer func() { h.release <- struct{}{}; readAll(t, st2) }()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := a.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with r2 in flight, r1 ended before it began: %v", err)
	}
}

// A run refused because the node drains is not counted as refused over
// capacity (the usage command's rejected_over_capacity): the provider was
// not full.
func TestDrainRefusalNotCountedOverCapacity(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	le := startLoadEdge(t, heldPayload())
	a := heldAgent(t, h)
	c := startNode(t, le.fakeEdge, a)
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	envs := readAll(t, openRun(t, c, "r1"))
	if ev := terminal(envs); ev.GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED {
		t.Fatalf("run during the drain: %v", envs)
	}
	for _, u := range a.usage()["adapters"].([]adapterUsage) {
		if u.Rejected != 0 {
			t.Fatalf("%s: %d runs counted as rejected over capacity", u.Adapter, u.Rejected)
		}
	}
}
