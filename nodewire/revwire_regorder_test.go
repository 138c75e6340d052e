package nodewire

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// With registration orders given (as the edge's dispatcher gives them), a
// newer registration arriving while an older one of its node id waits for
// its ready closes the older one and is itself kept waiting: the older
// one's end does not forget it, and it becomes ready.
func TestOrderedNewerRegistrationClosesOlderAndStaysAwaiting(t *testing.T) {
	h := newFakeHandler()
	var order atomic.Uint64
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		c.SetRegisterOrder(order.Add(1))
		return acceptResponse(req.GetNodeId(), testHeartbeat)
	}
	ts := startServer(t, h, ServerConfig{ReadyTimeout: time.Minute})
	awaiting := func(c *Conn) func() bool {
		return func() bool {
			ts.srv.mu.Lock()
			defer ts.srv.mu.Unlock()
			return ts.srv.awaiting["n1"] == c
		}
	}
	first, _ := dial(t, DialConfig{Address: ts.addr}, "n1")
	firstEdge := recvConn(t, h.registered, "the first registration")
	waitFor(t, "the first registration to wait for its ready", awaiting(firstEdge))
	second, _ := dial(t, DialConfig{Address: ts.addr}, "n1")
	secondEdge := recvConn(t, h.registered, "the second registration")

	cl := recvClosed(t, h)
	if cl.c != firstEdge || !errors.Is(cl.err, errSuperseded) {
		t.Fatalf("closed %p for %v, want the older registration superseded", cl.c, cl.err)
	}
	select {
	case <-first.Done():
	case <-time.After(waitLong):
		t.Fatal("the superseded connection was kept open")
	}
	// The older one's serveConn has ended (its Closed was reported after
	// it forgot itself): the newer one is still the one waiting.
	if !awaiting(secondEdge)() {
		t.Fatal("the older registration's end forgot the newer one waiting for its ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := second.Ready(ctx, "n1"); err != nil {
		t.Fatalf("the newer connection's ready: %v", err)
	}
	if secondEdge.IsClosed() {
		t.Fatal("the newer connection was closed")
	}
}
