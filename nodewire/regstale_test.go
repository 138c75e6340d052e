package nodewire

import (
	"errors"
	"io"
	"testing"
	"time"
)

// An older registration of a node id whose answer goes out only after a
// newer one has gone through its ready exchange can only be stale: it is
// closed as superseded at once, not held for ReadyTimeout (an hour here)
// in its place in MaxConns. The newer connection stays ready; if it has
// already ended, the older one is still the stale one.
func TestStaleRegistrationAnsweredAfterNewerReadyClosedAtOnce(t *testing.T) {
	for _, newerGone := range []bool{false, true} {
		name := "newer ready"
		if newerGone {
			name = "newer ready and gone"
		}
		t.Run(name, func(t *testing.T) {
			h, ts, firstEdge, release, firstAnswer := holdFirstRegistration(t, time.Hour)

			second, secondEdge := readyPair(t, ts, "n1")
			if newerGone {
				_ = second.Close()
				if cl := recvClosed(t, h); cl.c != secondEdge {
					t.Fatalf("closed %p, want the newer connection", cl.c)
				}
			}
			release()
			first := firstAnswer()
			// The close may come before the node has opened its
			// control stream (its Dial then fails, and it dials again).
			if first.err == nil {
				t.Cleanup(func() { _ = first.cc.Close() })
			} else if !errors.Is(first.err, ErrClosed) && !errors.Is(first.err, io.EOF) {
				t.Fatalf("first Dial: %v, want accepted or its session closed", first.err)
			}

			// Its node never sends a ready on it: the close is the
			// server's own, long before ReadyTimeout.
			cl := recvClosed(t, h)
			if cl.c != firstEdge || !errors.Is(cl.err, errSuperseded) {
				t.Fatalf("closed %p for %v, want the first registration superseded", cl.c, cl.err)
			}
			if first.err == nil {
				select {
				case <-first.cc.Done():
				case <-time.After(waitLong):
					t.Fatal("the older registration, stale, was kept open")
				}
			}
			if !newerGone && secondEdge.IsClosed() {
				t.Fatal("the newer, ready connection was closed")
			}
		})
	}
}
