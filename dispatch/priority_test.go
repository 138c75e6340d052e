package dispatch

import (
	"container/list"
	"context"
	"errors"
	"testing"
	"time"
)

func oneSlot(t *testing.T, timeout float64) *fixture {
	t.Helper()
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: timeout, cands: []string{"a/p"}}})
	f := newFixture(t, cfg, nil)
	f.up("a")
	return f
}

// A higher priority waiter is served before an older lower one; equal
// priorities keep arrival order.
func TestPriorityOrdersTheQueue(t *testing.T) {
	f := oneSlot(t, 30)
	ctx := context.Background()
	held := mustAcquire(t, f.d, Request{Model: "m"})
	low := f.enqueue(ctx, Request{Model: "m"})
	low2 := f.enqueue(ctx, Request{Model: "m"})
	high := f.enqueue(ctx, Request{Model: "m", Priority: 2})
	held.Release(ReasonCompleted)
	l := recvLease(t, high)
	select {
	case <-low:
		t.Fatal("the older low-priority waiter was served before the high one")
	default:
	}
	l.Release(ReasonCompleted)
	recvLease(t, low).Release(ReasonCompleted)
	recvLease(t, low2).Release(ReasonCompleted)
}

// Ageing: priority counts PriorityStep per level, so a low waiter that has
// waited longer than the difference is ahead of a newer high one.
func TestPriorityAges(t *testing.T) {
	q := list.New()
	now := int64(time.Hour)
	old := &waiter{seq: 1, key: now - int64(6*time.Second)}                           // priority 0, 6 s ago
	fresh := &waiter{seq: 2, key: now - 1*int64(PriorityStep)}                        // priority 1, now
	mid := &waiter{seq: 3, key: now - int64(2*time.Second)}                           // priority 0, 2 s ago
	neg := &waiter{seq: 4, key: now - int64(30*time.Second) + int64(PriorityStep)*10} // priority -10, 30 s ago
	for _, w := range []*waiter{old, fresh, mid, neg} {
		insertWaiter(q, w)
	}
	var got []uint64
	for e := q.Front(); e != nil; e = e.Next() {
		got = append(got, e.Value.(*waiter).seq)
	}
	if want := []uint64{old.seq, fresh.seq, mid.seq, neg.seq}; !equalSeqs(got, want) {
		t.Fatalf("queue order %v, want %v", got, want)
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A caller's deadline drops its waiter when it passes, not at the end of
// the model's queue timeout.
func TestDeadlineDropsWaiter(t *testing.T) {
	f := oneSlot(t, 60)
	held := mustAcquire(t, f.d, Request{Model: "m"})
	defer held.Release(ReasonCompleted)
	start := time.Now()
	_, err := f.d.Acquire(context.Background(), Request{Model: "m", Deadline: start.Add(200 * time.Millisecond)})
	if !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("err = %v, want ErrQueueTimeout", err)
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Fatalf("waited %s: the deadline did not cut the 60 s queue timeout short", waited)
	}
	if pendingOf(f.d.Status(), "m") != 0 {
		t.Fatal("the dropped waiter is still queued")
	}
	// A deadline already past fails at once.
	if _, err := f.d.Acquire(context.Background(), Request{Model: "m", Deadline: time.Now().Add(-time.Second)}); !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("past deadline: %v", err)
	}
}
