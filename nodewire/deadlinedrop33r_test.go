package nodewire

import (
	"testing"
	"time"
)

// A dropped timer is stopped, not only let go: one left armed would still
// hold its closure, and the stream with it, until the old deadline (a
// write deadline may be minutes ahead). Stop on the timer taken before
// reports false only when the drop stopped it already.
func TestDroppedTimerIsStopped(t *testing.T) {
	st := &muxStream{}
	for _, c := range []struct {
		name string
		drop func(*streamDeadline)
	}{
		{"dropLocked", (*streamDeadline).dropLocked},
		{"offLocked", (*streamDeadline).offLocked},
	} {
		var d streamDeadline
		if d.setLocked(time.Now().Add(time.Hour), st, func(*muxStream) {}) {
			t.Fatalf("%s: a deadline an hour ahead has passed", c.name)
		}
		tm := d.timer
		if tm == nil {
			t.Fatalf("%s: a deadline ahead armed no timer", c.name)
		}
		c.drop(&d)
		if d.timer != nil {
			t.Errorf("%s: the timer is still held", c.name)
		}
		if tm.Stop() {
			t.Errorf("%s: the timer was let go still armed", c.name)
		}
	}
}

// The write deadline cleared through the stream stops its timer too, and
// a stream whose write side is closed lets go of its write timer (off).
func TestClearedAndClosedWriteDeadlineStopTimer(t *testing.T) {
	a, b := announcedPair(t)
	_ = b.SetWriteDeadline(time.Now().Add(time.Hour))
	b.mu.Lock()
	tm := b.wdl.timer
	b.mu.Unlock()
	_ = b.SetWriteDeadline(time.Time{})
	if tm == nil || tm.Stop() {
		t.Fatalf("the cleared write deadline's timer (%v) was left armed", tm)
	}

	_ = a.SetWriteDeadline(time.Now().Add(time.Hour))
	a.mu.Lock()
	tm = a.wdl.timer
	a.mu.Unlock()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if timerHeld(a, &a.wdl) {
		t.Fatal("the closed write side still holds its deadline's timer")
	}
	if tm == nil || tm.Stop() {
		t.Fatalf("the closed write side's timer (%v) was left armed", tm)
	}
}
