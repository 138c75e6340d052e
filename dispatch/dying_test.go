package dispatch

import (
	"context"
	"testing"
)

// Between a node's connection closing and the registry fencing it (the
// Closed callback waits for the lock), none of its slots is handed out: a
// request given one would fail on the dead connection instead of waiting
// for another provider.
func TestClosedConnectionSlotsNotHandedOut(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), []tModel{{name: "m", timeout: 60, cands: []string{"n1/p"}}}), nil)
	h, addr := startWire(t, f)
	cc := dialNode(t, addr, "n1")
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })
	l := mustAcquire(t, f.d, Request{Model: "m"})
	l2 := mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := f.enqueue(ctx, Request{Model: "m"})

	sc := h.conn(0)
	f.d.mu.Lock()
	closed := make(chan struct{})
	// Owner: the test; Close returns once the Closed callback (which needs
	// the lock released below) has run.
	go func() { _ = sc.Close(); close(closed) }()
	waitFor(t, "connection closed", sc.IsClosed)
	m := f.d.models["m"]
	f.d.releaseLocked(l, ReasonCompleted)
	f.d.pumpLocked(l.res)
	pending := m.pending
	f.d.mu.Unlock()
	await(t, closed, "the connection's Close to return")

	if pending != 1 {
		t.Fatalf("pending = %d after a slot of the closed connection was freed, want 1 (still waiting)", pending)
	}
	l2.Release(ReasonCompleted)
	cancel()
	wantErr(t, recv(t, w).err, context.Canceled)
}

// An exchange that failed because its node's connection died, returned
// before the registry fenced it, counts as node_lost (what the fence would
// have said), not as an error of the provider.
func TestErrorOnClosedConnectionCountsAsNodeLost(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	h, addr := startWire(t, f)
	cc := dialNode(t, addr, "n1")
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })
	l := mustAcquire(t, f.d, Request{Model: "m"})

	sc := h.conn(0)
	f.d.mu.Lock()
	closed := make(chan struct{})
	// Owner: the test; Close returns once the Closed callback (which needs
	// the lock released below) has run.
	go func() { _ = sc.Close(); close(closed) }()
	waitFor(t, "connection closed", sc.IsClosed)
	f.d.releaseLocked(l, ReasonError)
	f.d.mu.Unlock()
	await(t, closed, "the connection's Close to return")

	if _, why := l.Released(); why != ReasonNodeLost {
		t.Fatalf("release reason = %s, want %s", why, ReasonNodeLost)
	}
	if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", ReasonError)); got != 0 {
		t.Fatalf("released{error} = %v, want 0", got)
	}
}
