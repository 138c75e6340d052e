package nodewire

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// newestLen is how many node ids the server remembers a registration
// order for.
func (s *Server) newestLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.newest)
}

// idConnsLen is how many node ids the server counts connections for.
func (s *Server) idConnsLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idConns)
}

// orderedHandler is a fakeHandler that gives every registration the next
// order, as the dispatcher does.
func orderedHandler() *fakeHandler {
	h := newFakeHandler()
	var order atomic.Uint64
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		c.SetRegisterOrder(order.Add(1))
		return acceptResponse(req.GetNodeId(), testHeartbeat)
	}
	return h
}

// Node ids come and go (config reloads, renamed nodes): the server's
// per-id registration order goes with an id's last connection, so it holds
// no more ids than connections, not every id it ever accepted.
func TestRegistrationOrderForgottenWithItsIDsLastConnection(t *testing.T) {
	h := orderedHandler()
	ts := startServer(t, h, ServerConfig{})
	const ids = 40
	for round := range 2 {
		var clients []*ClientConn
		for i := range ids / 2 {
			cc, _ := readyPair(t, ts, fmt.Sprintf("n%d-%d", round, i))
			clients = append(clients, cc)
		}
		if got := ts.srv.newestLen(); got != ids/2 {
			t.Fatalf("round %d: %d ids remembered with %d connections, want %d", round, got, len(clients), ids/2)
		}
		for _, cc := range clients {
			_ = cc.Close()
			recvClosed(t, h)
		}
		// Closed is called after the entry went: nothing left to wait for.
		if got := ts.srv.newestLen(); got != 0 {
			t.Fatalf("round %d: %d ids remembered after all their connections ended, want 0", round, got)
		}
	}
	if got := ts.srv.idConnsLen(); got != 0 {
		t.Fatalf("%d ids counted with no connection, want 0", got)
	}
}

// A rejected registration (an id not configured) leaves nothing behind.
func TestRejectedRegistrationLeavesNoIDEntry(t *testing.T) {
	h := newFakeHandler()
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		return rejectResponse(iop.RejectCode_REJECT_CODE_UNKNOWN_NODE, "unknown node")
	}
	ts := startServer(t, h, ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if cc, _, err := Dial(ctx, DialConfig{Address: ts.addr}, testRegisterRequest("stranger")); err == nil {
		_ = cc.Close()
		t.Fatal("Dial accepted an unknown id")
	}
	recvClosed(t, h)
	if n, m := ts.srv.newestLen(), ts.srv.idConnsLen(); n != 0 || m != 0 {
		t.Fatalf("after a rejection: %d orders, %d counts remembered, want none", n, m)
	}
}

// An id with a second, newer connection keeps its entry while either is
// open: the older ending does not drop it, and a registration of the id
// still older than the one that waited is closed as superseded (the
// existing TestStaleRegistrationAnsweredAfterNewerReadyClosedAtOnce pins
// the held-answer case).
func TestRegistrationOrderKeptWhileTheIDHasAConnection(t *testing.T) {
	h := orderedHandler()
	ts := startServer(t, h, ServerConfig{})
	first, firstEdge := readyPair(t, ts, "n1")
	second, secondEdge := readyPair(t, ts, "n1")
	if firstEdge.RegisterOrder() >= secondEdge.RegisterOrder() {
		t.Fatalf("orders %d, %d: want growing", firstEdge.RegisterOrder(), secondEdge.RegisterOrder())
	}
	_ = first.Close()
	if cl := recvClosed(t, h); cl.c != firstEdge {
		t.Fatalf("closed %p, want the first connection", cl.c)
	}
	if got := ts.srv.newestLen(); got != 1 {
		t.Fatalf("%d ids remembered with n1 still connected, want 1", got)
	}
	ts.srv.mu.Lock()
	got := ts.srv.newest["n1"]
	ts.srv.mu.Unlock()
	if got != secondEdge.RegisterOrder() {
		t.Fatalf("n1's newest order %d, want the open connection's %d", got, secondEdge.RegisterOrder())
	}
	_ = second.Close()
	select {
	case cl := <-h.closedCh:
		if cl.c != secondEdge {
			t.Fatalf("closed %p, want the second connection", cl.c)
		}
	case <-time.After(waitLong):
		t.Fatal("the second connection's close was not reported")
	}
	if got := ts.srv.newestLen(); got != 0 {
		t.Fatalf("%d ids remembered after n1's last connection ended, want 0", got)
	}
}
