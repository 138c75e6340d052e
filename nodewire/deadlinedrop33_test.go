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

// A cleared deadline lets go of its timer: a held stream keeps none for a
// direction nothing bounds any more, as the edge's write side once its
// request went out (dispatch sets the write deadline for the send, then
// clears it, and the stream may then be held for minutes). A deadline set
// ahead again gets a timer again and still ends a blocked read.
func TestClearedDeadlineHoldsNoTimer(t *testing.T) {
	a, b := announcedPair(t)
	for _, dir := range []struct {
		name string
		set  func(time.Time) error
		d    *streamDeadline
	}{
		{"write", b.SetWriteDeadline, &b.wdl},
		{"read", b.SetReadDeadline, &b.rdl},
	} {
		_ = dir.set(time.Now().Add(time.Hour))
		if !timerHeld(b, dir.d) {
			t.Fatalf("%s: a deadline ahead armed no timer", dir.name)
		}
		_ = dir.set(time.Time{})
		if timerHeld(b, dir.d) {
			t.Fatalf("%s: the cleared deadline still holds its timer", dir.name)
		}
	}

	_ = b.SetReadDeadline(time.Now().Add(time.Hour))
	_ = b.SetReadDeadline(time.Time{})
	res := blockedRead(b)
	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if r := awaitRead(t, res, "deadline set again after a clear"); !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", r.err)
	}

	// The stream's own Stream, as dispatch drives it for a request.
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
