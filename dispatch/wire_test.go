package dispatch

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// spyHandler forwards to the dispatcher and records the server-side
// connections, so a test can wait for a Closed callback.
type spyHandler struct {
	d      *Dispatcher
	mu     sync.Mutex
	conns  []*nodewire.Conn // in Register order
	closed map[*nodewire.Conn]chan struct{}
}

func (h *spyHandler) Register(c *nodewire.Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.closed[c] = make(chan struct{})
	h.mu.Unlock()
	return h.d.Register(c, req)
}

func (h *spyHandler) Ready(c *nodewire.Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse {
	return h.d.Ready(c, req)
}

func (h *spyHandler) Activate(c *nodewire.Conn) { h.d.Activate(c) }

func (h *spyHandler) Closed(c *nodewire.Conn, err error) {
	h.d.Closed(c, err)
	h.mu.Lock()
	close(h.closed[c])
	h.mu.Unlock()
}

func (h *spyHandler) conn(i int) *nodewire.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[i]
}

func (h *spyHandler) waitClosed(t *testing.T, c *nodewire.Conn) {
	t.Helper()
	h.mu.Lock()
	ch := h.closed[c]
	h.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(waitDeadline):
		t.Fatal("server never reported the connection closed")
	}
}

// startWire serves f's dispatcher on a loopback nodewire server.
func startWire(t *testing.T, f *fixture) (*spyHandler, string) {
	t.Helper()
	h := &spyHandler{d: f.d, closed: map[*nodewire.Conn]chan struct{}{}}
	return h, serveOnLoopback(t, h)
}

// serveOnLoopback serves h on a loopback nodewire server, closed at the
// test's end, and returns its address.
func serveOnLoopback(t *testing.T, h nodewire.ServerHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := nodewire.NewServer(nodewire.ServerConfig{Handler: h, HandshakeTimeout: waitDeadline, ReadyTimeout: waitDeadline})
	done := make(chan error, 1)
	// Owner: the test; ends when the cleanup closes the server.
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dialNode(t *testing.T, addr, node string) *nodewire.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	cc, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: addr, HandshakeTimeout: waitDeadline}, regReq(node, testToken))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if !resp.GetAccepted() {
		t.Fatalf("register rejected: %v", resp)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// A newer registration of a ready node id supersedes the ready owner and
// fences its generation exactly once, in the registration step: its leases
// return node_lost once; the Edge closes the old connection, and that
// connection's later Closed callback changes nothing (no second fence, no
// event). The new owner is pending until its own ready.
func TestSupersedeReadyOwnerOverWire(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	h, addr := startWire(t, f)
	ctx := context.Background()

	old := dialNode(t, addr, "n1")
	if err := old.Ready(ctx, "n1"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	oldSrv := h.conn(0)
	la := mustAcquire(t, f.d, Request{Model: "m"})
	lb := mustAcquire(t, f.d, Request{Model: "m", PromptTokens: 1})
	w := f.enqueue(ctx, Request{Model: "m"})

	// Supersede. Dial returns after the Register handler ran.
	nw := dialNode(t, addr, "n1")
	afterFence := func(stage string) {
		t.Helper()
		for _, l := range []*Lease{la, lb} {
			if rel, why := l.Released(); !rel || why != ReasonNodeLost {
				t.Fatalf("%s: lease released=%v reason=%q", stage, rel, why)
			}
		}
		if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", ReasonNodeLost)); got != 2 {
			t.Fatalf("%s: node_lost releases = %v, want 2", stage, got)
		}
		if got := metricValue(t, f.reg, "iop_lease_released_total", nil); got != 2 {
			t.Fatalf("%s: releases = %v, want 2", stage, got)
		}
		if got := f.bus.types(); !slices.Equal(got, []string{EventNodeConnected, EventNodeSuperseded}) {
			t.Fatalf("%s: events = %v", stage, got)
		}
		if got := metricValue(t, f.reg, "iop_node_sessions_total", map[string]string{"outcome": "lost"}); got != 0 {
			t.Fatalf("%s: lost sessions = %v", stage, got)
		}
		st := f.d.Status()
		if nodeOf(st, "n1").Connected {
			t.Fatalf("%s: connected while the new owner is pending", stage)
		}
		assertOffline(t, provOf(st, "n1", "p"))
		if pendingOf(st, "m") != 1 {
			t.Fatalf("%s: pending = %d", stage, pendingOf(st, "m"))
		}
	}
	afterFence("after register")
	if la.Release(ReasonCompleted) {
		t.Fatal("Release after fencing reported releasing")
	}

	// The Edge closes the superseded ready connection; its Closed callback
	// is inert.
	h.waitClosed(t, oldSrv)
	select {
	case <-old.Done():
	case <-time.After(waitDeadline):
		t.Fatal("old node connection was not closed by the edge")
	}
	afterFence("after old Closed")
	f.d.Closed(oldSrv, errors.New("again"))
	afterFence("after repeated Closed")
	if resp := f.d.Ready(oldSrv, &iop.NodeReadyRequest{NodeId: "n1"}); resp.GetReady() || resp.GetReason() == "" {
		t.Fatalf("superseded connection's ready = %v", resp)
	}

	// The new owner's ready activates a fresh generation and serves the
	// waiter queued across the switch.
	if err := nw.Ready(ctx, "n1"); err != nil {
		t.Fatalf("new ready: %v", err)
	}
	l := recvLease(t, w)
	if l.conn != h.conn(1) {
		t.Fatal("lease not bound to the new connection")
	}
	if p := provOf(f.d.Status(), "n1", "p"); p.InFlight != 1 || p.Status != "available" {
		t.Fatalf("new generation: %+v", *p)
	}
	if got := f.bus.types(); !slices.Equal(got, []string{EventNodeConnected, EventNodeSuperseded, EventNodeConnected}) {
		t.Fatalf("events = %v", got)
	}
	l.Release(ReasonCompleted)

	// Losing the new owner over the wire fences once more, with one event.
	_ = nw.Close()
	h.waitClosed(t, h.conn(1))
	if got := f.bus.types(); !slices.Equal(got, []string{EventNodeConnected, EventNodeSuperseded, EventNodeConnected, EventNodeDisconnected}) {
		t.Fatalf("events = %v", got)
	}
	assertOffline(t, provOf(f.d.Status(), "n1", "p"))
}

// Over the real wire, a duplicate ready from the ready owner is answered
// ready=true and keeps the session: the node stays connected and its
// resources were activated once (one node.connected event).
func TestDuplicateReadyOverWire(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	_, addr := startWire(t, f)
	cc := dialNode(t, addr, "n1")
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	l := mustAcquire(t, f.d, Request{Model: "m"})
	if err := cc.ReadyAgain("n1"); err != nil {
		t.Fatal(err)
	}
	// The answer arrives and the session keeps heartbeating.
	before := cc.Stats().HeartbeatsReceived
	waitFor(t, "heartbeats after the duplicate ready", func() bool { return cc.Stats().HeartbeatsReceived >= before+1 })
	if cc.IsClosed() || !nodeOf(f.d.Status(), "n1").Connected {
		t.Fatalf("the duplicate ready ended the session: %v", cc.Err())
	}
	if rel, _ := l.Released(); rel {
		t.Fatal("a lease was fenced by a duplicate ready")
	}
	connected := 0
	for _, e := range f.bus.types() {
		if e == EventNodeConnected {
			connected++
		}
	}
	if connected != 1 {
		t.Fatalf("node.connected %d times, want 1", connected)
	}
	l.Release(ReasonCompleted)
}
