package dispatch

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// acquireBlockedOnLock reports whether some goroutine is inside Acquire
// waiting for the dispatcher's lock (after its wait ended).
func acquireBlockedOnLock() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lockSlow") && strings.Contains(g, "dispatch.(*Dispatcher).Acquire(") {
			return true
		}
	}
	return false
}

// A waiter whose caller left and which was granted a slot before it could
// leave the queue hands the lease back (reason cancelled) and reports the
// caller's cancellation: the caller gone never holds a slot.
func TestCancelledWaiterGrantedMeanwhileGivesLeaseBack(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{timeout: 60})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := f.enqueue(ctx, Request{Model: "m"})

	// Hold the lock so the cancelled waiter cannot leave the queue, then
	// free the slot under that same lock: it is granted to the waiter.
	f.d.mu.Lock()
	cancel()
	waitFor(t, "cancelled waiter waiting for the lock", acquireBlockedOnLock)
	if !f.d.releaseLocked(l, ReasonCompleted) {
		f.d.mu.Unlock()
		t.Fatal("lease was already released")
	}
	f.d.pumpLocked(l.res)
	f.d.mu.Unlock()

	r := recv(t, ch)
	if r.l != nil {
		r.l.Release(ReasonCompleted)
	}
	wantErr(t, r.err, context.Canceled)
	if got := metricValue(t, f.reg, "iop_lease_released_total", released("a", "p", ReasonCancelled)); got != 1 {
		t.Fatalf("released{cancelled} = %v, want 1", got)
	}
	if p := provOf(f.d.Status(), "a", "p"); p.InFlight != 0 {
		t.Fatalf("in flight = %d, want 0", p.InFlight)
	}
}

// A waiter that timed out but was granted a slot before it could leave
// the queue keeps the lease: its caller is still there to use it.
func TestTimedOutWaiterGrantedMeanwhileKeepsLease(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{timeout: 0.001})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	// The hook holds the waiter until the test has the lock, so its queue
	// timeout (started after the hook) passes with the lock held.
	queued, locked := make(chan struct{}), make(chan struct{})
	testHookQueued = func() { close(queued); <-locked }
	defer func() { testHookQueued = nil }()
	ch := f.acquireAsync(context.Background(), Request{Model: "m"})
	await(t, queued, "the request queued")
	f.d.mu.Lock()
	close(locked)
	waitFor(t, "timed-out waiter waiting for the lock", acquireBlockedOnLock)
	f.d.releaseLocked(l, ReasonCompleted)
	f.d.pumpLocked(l.res)
	f.d.mu.Unlock()

	r := recv(t, ch)
	if r.err != nil {
		t.Fatalf("acquire: %v, want the lease granted meanwhile", r.err)
	}
	r.l.Release(ReasonCompleted)
}
