package dispatch

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// readyDrainingNode dials n1 on addr and sends its ready request with
// draining as given.
func readyDrainingNode(t *testing.T, f *fixture, addr string, draining bool) *nodewire.ClientConn {
	t.Helper()
	cc := dialNode(t, addr, "n1")
	if err := cc.ReadyWith(context.Background(), &iop.NodeReadyRequest{NodeId: "n1", Adapters: f.caps("n1"), Draining: draining}); err != nil {
		t.Fatalf("ready: %v", err)
	}
	return cc
}

// A node whose ready says it drains (a connect attempt under way when its
// drain began) goes live draining: a request already waiting for it is
// not handed its free slot, the status shows the provider draining from
// the first moment it is live, and readiness does not count it. Its next
// session, not draining, is live as usual.
func TestReadyDrainingNodeGoesLiveDraining(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	h, addr := startWire(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiter := f.enqueue(ctx, Request{Model: "m"})

	cc := readyDrainingNode(t, f, addr, true)
	waitFor(t, "n1 live", func() bool { return provOf(f.d.Status(), "n1", "p").Health != "offline" })
	st := f.d.Status()
	if p := provOf(st, "n1", "p"); p.Health != "draining" || p.Status != "draining" || p.InFlight != 0 {
		t.Fatalf("n1/p once live = health %q status %q in_flight %d, want draining, draining, 0", p.Health, p.Status, p.InFlight)
	}
	if got := pendingOf(st, "m"); got != 1 {
		t.Fatalf("pending for m = %d once the draining node is live, want 1 (nothing granted there)", got)
	}
	if f.d.Dispatchable() {
		t.Fatal("Dispatchable with the only referenced provider draining")
	}
	select {
	case r := <-waiter:
		t.Fatalf("the waiter got %v, %v from a draining node", r.l, r.err)
	default:
	}

	// The next session does not drain: the flag was the session's.
	_ = cc.Close()
	h.waitClosed(t, h.conn(0))
	readyDrainingNode(t, f, addr, false)
	l := recvLease(t, waiter)
	if l.NodeID != "n1" {
		t.Fatalf("lease on %s, want n1", l.NodeID)
	}
	l.Release(ReasonCompleted)
	if p := provOf(f.d.Status(), "n1", "p"); p.Health != "ok" || p.Status != "available" {
		t.Fatalf("n1/p after a session that does not drain = %q %q, want ok, available", p.Health, p.Status)
	}
}

// A repeated ready from the ready owner that says it drains now is taken
// as a draining report: nothing more is granted there.
func TestRepeatedReadyDrainingStopsGrants(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	_, addr := startWire(t, f)
	cc := readyDrainingNode(t, f, addr, false)
	waitFor(t, "n1 live", func() bool { return provOf(f.d.Status(), "n1", "p").Health == "ok" })
	c := func() *nodewire.Conn {
		f.d.mu.Lock()
		defer f.d.mu.Unlock()
		return f.d.nodes["n1"].owner
	}()
	if resp := f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "n1", Draining: true}); !resp.GetReady() {
		t.Fatalf("repeated ready refused: %s", resp.GetReason())
	}
	if p := provOf(f.d.Status(), "n1", "p"); p.Health != "draining" {
		t.Fatalf("n1/p after a repeated draining ready = %q, want draining", p.Health)
	}
	// A cancelled context probes the fast path alone: a free slot is
	// granted at once whatever the context, anything else fails.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if l, err := f.d.Acquire(ctx, Request{Model: "m"}); err == nil {
		l.Release(ReasonCompleted)
		t.Fatal("granted on a provider whose node said it drains")
	}
	_ = cc.Close()
}
