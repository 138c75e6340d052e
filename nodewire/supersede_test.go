package nodewire

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An accepted registration supersedes an older connection of the same node
// id that is still waiting for its ready: the edge closes the older one at
// once instead of holding it for the whole ready timeout, so one node's
// credentials cannot pile up connections (up to max_node_conns, locking
// every other node out) by registering again and again.
func TestNewerRegistrationClosesOlderAwaitingReady(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{ReadyTimeout: time.Minute})
	first, _ := dial(t, DialConfig{Address: ts.addr}, "n1")
	firstEdge := recvConn(t, h.registered, "the first registration")
	// The first is waiting for its ready before the second registers (the
	// node reads its answer before the edge records it as waiting).
	waitFor(t, "the first registration to wait for its ready", func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.awaiting["n1"] == firstEdge
	})
	second, _ := dial(t, DialConfig{Address: ts.addr}, "n1")
	recvConn(t, h.registered, "the second registration")

	select {
	case <-first.Done():
	case <-time.After(waitLong):
		t.Fatal("the superseded connection, never ready, was kept open")
	}
	cl := recvClosed(t, h)
	if cl.c != firstEdge {
		t.Fatal("the edge closed another connection than the superseded one")
	}
	if !errors.Is(cl.err, ErrClosed) {
		t.Fatalf("closed for %v, want ErrClosed", cl.err)
	}
	// The newer one is untouched and becomes ready.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := second.Ready(ctx, "n1"); err != nil {
		t.Fatalf("the newer connection's ready: %v", err)
	}
	// Another node's registration supersedes nothing.
	dial(t, DialConfig{Address: ts.addr}, "n2")
	recvConn(t, h.registered, "another node's registration")
	if second.IsClosed() {
		t.Fatal("another node's registration closed n1's connection")
	}
}
