package nodewire

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
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
			h := newFakeHandler()
			var order atomic.Uint64
			holdFirst := make(chan struct{})
			h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
				n := order.Add(1)
				c.SetRegisterOrder(n)
				if n == 1 {
					// The first registration's answer goes out only
					// after the second one's ready exchange.
					<-holdFirst
				}
				return acceptResponse(req.GetNodeId(), testHeartbeat)
			}
			ts := startServer(t, h, ServerConfig{ReadyTimeout: time.Hour})

			type dialed struct {
				cc  *ClientConn
				err error
			}
			firstCh := make(chan dialed, 1)
			// Owner: this test; ends when the held answer is released
			// (below, or by the cleanup that closes the server).
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				defer cancel()
				cc, _, err := Dial(ctx, DialConfig{Address: ts.addr}, testRegisterRequest("n1"))
				firstCh <- dialed{cc, err}
			}()
			firstEdge := recvConn(t, h.registered, "the first registration")
			released := false
			release := func() {
				if !released {
					released = true
					close(holdFirst)
				}
			}
			t.Cleanup(release)

			second, secondEdge := readyPair(t, ts, "n1")
			if newerGone {
				_ = second.Close()
				if cl := recvClosed(t, h); cl.c != secondEdge {
					t.Fatalf("closed %p, want the newer connection", cl.c)
				}
			}
			release()
			var first dialed
			select {
			case first = <-firstCh:
			case <-time.After(waitLong):
				t.Fatal("the first registration's answer never arrived")
			}
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
