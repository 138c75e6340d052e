package nodewire

import (
	"errors"
	"os"
	"testing"
	"time"
)

// timerHeld reports whether a direction's deadline holds a timer (st.mu
// taken).
func timerHeld(st *muxStream, d *streamDeadline) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return d.timer != nil
}

// A cleared write deadline lets go of its timer: a held stream keeps none
// for a direction nothing bounds any more, as the edge's write side once
// its request went out (dispatch sets the write deadline for the send,
// then clears it, and the stream may then be held for minutes). A read
// deadline keeps its timer when cleared: one is cleared and set again
// within an exchange, and a new timer each time would cost an allocation
// per exchange.
func TestClearedWriteDeadlineHoldsNoTimer(t *testing.T) {
	a, b := announcedPair(t)
	_ = b.SetWriteDeadline(time.Now().Add(time.Hour))
	if !timerHeld(b, &b.wdl) {
		t.Fatal("a write deadline ahead armed no timer")
	}
	_ = b.SetWriteDeadline(time.Time{})
	if timerHeld(b, &b.wdl) {
		t.Fatal("the cleared write deadline still holds its timer")
	}
	_ = b.SetReadDeadline(time.Now().Add(time.Hour))
	_ = b.SetReadDeadline(time.Time{})
	if !timerHeld(b, &b.rdl) {
		t.Fatal("the cleared read deadline dropped its timer, to be made again when set")
	}

	// The stream's Stream, as dispatch drives it for a request.
	ws := newStream(a, 1<<20)
	_ = ws.SetWriteDeadline(time.Now().Add(time.Hour))
	if err := ws.Send(runRequest("r1")); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetWriteDeadline(time.Time{})
	if timerHeld(a, &a.wdl) {
		t.Fatal("the write deadline cleared after a send still holds its timer")
	}
}

// A write deadline set again after a clear dropped its timer still ends a
// write blocked for window credit (the peer never reads).
func TestWriteDeadlineAfterClearEndsBlockedWrite(t *testing.T) {
	a, _ := announcedPair(t)
	_ = a.SetWriteDeadline(time.Now().Add(time.Hour))
	_ = a.SetWriteDeadline(time.Time{})
	_ = a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	done := make(chan readResult, 1)
	go func() { // Owner: the test; ends with the write (the deadline or the pair's close).
		_, err := a.Write(make([]byte, muxWindow+1))
		done <- readResult{err, time.Now()}
	}()
	// awaitRead fails the test if the write never ends: the deadline set
	// after a clear armed no timer.
	if r := awaitRead(t, done, "write blocked for credit"); !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the window: %v, want a deadline error", r.err)
	}
}

// A timer whose callback is already running when its deadline is cleared,
// and a new deadline set, does no harm: the callback finds either no
// deadline or the new one. Run under -race, with deadlines a moment away
// so that callbacks and clears interleave.
func TestClearedDeadlineRacesItsTimer(t *testing.T) {
	_, b := announcedPair(t)
	for i := range 2000 {
		_ = b.SetWriteDeadline(time.Now().Add(time.Duration(i%3) * time.Microsecond))
		_ = b.SetWriteDeadline(time.Time{})
		_ = b.SetWriteDeadline(time.Now().Add(time.Hour))
	}
	_ = b.SetWriteDeadline(time.Time{})
	if timerHeld(b, &b.wdl) {
		t.Fatal("the cleared deadline still holds its timer")
	}
	b.mu.Lock()
	expired := b.wdl.expired
	b.mu.Unlock()
	if expired {
		t.Fatal("a stale timer marked the cleared deadline expired")
	}
}
