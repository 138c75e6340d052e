package nodewire

import (
	"sync"
	"testing"
	"time"
)

// A lent timer that fired unread gives no stale tick to its next waiter,
// and a second waiter while it is lent gets a timer of its own.
func TestWaitTimerReuse(t *testing.T) {
	var w waitTimer
	t1, own := w.start(time.Millisecond)
	if !own {
		t.Fatal("first start did not lend the stream's timer")
	}
	time.Sleep(5 * time.Millisecond) // it fires; nobody reads it
	w.stop(t1, own)

	t2, own2 := w.start(time.Hour)
	if !own2 || t2 != t1 {
		t.Fatal("the timer was not reused")
	}
	t3, own3 := w.start(time.Hour)
	if own3 || t3 == t2 {
		t.Fatal("a second waiter got the lent timer")
	}
	select {
	case <-t2.C:
		t.Fatal("stale tick from the earlier wait")
	case <-time.After(20 * time.Millisecond):
	}
	w.stop(t3, own3)
	w.stop(t2, own2)

	// Concurrent waiters (-race): every wait times out on its own deadline.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				start := time.Now()
				closed, err := waitSignal(make(chan struct{}), make(chan struct{}), start.Add(time.Millisecond), &w)
				if closed || err != errTimeout {
					t.Errorf("wait: closed %v, err %v", closed, err)
					return
				}
				if time.Since(start) < time.Millisecond {
					t.Error("wait returned before its deadline")
					return
				}
			}
		}()
	}
	wg.Wait()
}
