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

// Two registrations of one node id whose answers' writes end in the
// reverse order of their registrations: the later one (the handler's
// owner) stays and becomes ready; the earlier one, whose answer went out
// last, is the one closed as superseded. Before, the earlier one's
// arrival closed the later one, and its own ready was then refused as
// stale, leaving the node with neither.
func TestRegisterAnswersInReverseOrderKeepNewer(t *testing.T) {
	h, ts, firstEdge, release, firstAnswer := holdFirstRegistration(t, time.Minute)

	second, _ := dial(t, DialConfig{Address: ts.addr}, "n1")
	secondEdge := recvConn(t, h.registered, "the second registration")
	waitFor(t, "the second registration to wait for its ready", func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.awaiting["n1"] == secondEdge
	})
	release()
	// Exactly one is closed, and it must be the earlier registration.
	firstClosed(t, h, firstAnswer(), firstEdge, ErrClosed, "never ready")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := second.Ready(ctx, "n1"); err != nil {
		t.Fatalf("the newer connection's ready: %v", err)
	}
	if secondEdge.IsClosed() {
		t.Fatal("the newer connection was closed")
	}
}

// heldDial is a node's Dial's outcome.
// firstClosed checks that the server closes the first registration
// (firstEdge), answered as first, for a cause that is want, and that its
// node's session then ends. The close may come before that node has
// opened its control stream: its Dial then fails with its session closed,
// and the node dials again.
func firstClosed(t *testing.T, h *fakeHandler, first heldDial, firstEdge *Conn, want error, what string) {
	t.Helper()
	if first.err == nil {
		t.Cleanup(func() { _ = first.cc.Close() })
	} else if !errors.Is(first.err, ErrClosed) && !errors.Is(first.err, io.EOF) {
		t.Fatalf("first Dial: %v, want accepted or its session closed", first.err)
	}
	if cl := recvClosed(t, h); cl.c != firstEdge || !errors.Is(cl.err, want) {
		t.Fatalf("closed %p for %v, want the first registration (%p) closed for %v", cl.c, cl.err, firstEdge, want)
	}
	if first.err == nil {
		select {
		case <-first.cc.Done():
		case <-time.After(waitLong):
			t.Fatalf("the older registration, %s, was kept open", what)
		}
	}
}

type heldDial struct {
	cc  *ClientConn
	err error
}

// holdFirstRegistration starts a server whose handler stamps each
// registration of n1 with a growing order and holds the first one's
// answer until release (also called at cleanup), and dials that first
// registration. It returns its edge side, release, and firstAnswer, which
// waits for the first Dial's outcome.
//
// The first registration is the connection the test received first from
// h.registered, before it dials any other: known by its identity, it gets
// order 1 whichever handler call draws its order first (fakeHandler
// reports a registration before calling register, so a later one's call
// may run before the first one's).
func holdFirstRegistration(t *testing.T, readyTimeout time.Duration) (h *fakeHandler, ts *testServer, firstEdge *Conn, release func(), firstAnswer func() heldDial) {
	t.Helper()
	h = newFakeHandler()
	var order atomic.Uint64
	order.Store(1) // 1 is the first registration's
	holdFirst := make(chan struct{})
	firstKnown := make(chan struct{})   // closed once first is set
	firstOrdered := make(chan struct{}) // closed once first has its order
	var first *Conn                     // written before firstKnown is closed
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		select {
		case <-firstKnown:
		case <-holdFirst: // released at cleanup: the test has ended
			return acceptResponse(req.GetNodeId(), testHeartbeat)
		}
		if c != first {
			c.SetRegisterOrder(order.Add(1))
			return acceptResponse(req.GetNodeId(), testHeartbeat)
		}
		c.SetRegisterOrder(1)
		close(firstOrdered)
		// The first registration's answer goes out only when the test
		// releases it.
		<-holdFirst
		return acceptResponse(req.GetNodeId(), testHeartbeat)
	}
	ts = startServer(t, h, ServerConfig{ReadyTimeout: readyTimeout})
	firstCh := make(chan heldDial, 1)
	// Owner: the test; ends when the held answer is released (by the
	// test, or by the cleanup that closes the server).
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		cc, _, err := Dial(ctx, DialConfig{Address: ts.addr}, testRegisterRequest("n1"))
		firstCh <- heldDial{cc, err}
	}()
	firstEdge = recvConn(t, h.registered, "the first registration")
	first = firstEdge
	close(firstKnown)
	released := false
	release = func() {
		if !released {
			released = true
			close(holdFirst)
		}
	}
	t.Cleanup(release)
	// Its order is given before the test goes on: a handler that ran only
	// after the release would find holdFirst closed too, and could leave
	// the first registration without an order (0: the newest arrival
	// is kept), which is another case than the one tested.
	select {
	case <-firstOrdered:
	case <-time.After(waitLong):
		t.Fatal("the first registration was not given its order")
	}
	firstAnswer = func() heldDial {
		t.Helper()
		select {
		case d := <-firstCh:
			return d
		case <-time.After(waitLong):
			t.Fatal("the first registration's answer never arrived")
			return heldDial{}
		}
	}
	return h, ts, firstEdge, release, firstAnswer
}
