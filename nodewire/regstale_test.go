package nodewire

import (
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
			// Its node never sends a ready on it: the close is the
			// server's own, long before ReadyTimeout.
			firstClosed(t, h, firstAnswer(), firstEdge, errSuperseded, "stale")
			if !newerGone && secondEdge.IsClosed() {
				t.Fatal("the newer, ready connection was closed")
			}
		})
	}
}
