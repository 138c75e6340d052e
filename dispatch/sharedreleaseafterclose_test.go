package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A lease granted before Close whose request ends after it (an edge's
// drain that ran out, a node lost at shutdown) still returns its slot,
// also when the ledger is closed right after, as an edge does: the old
// code queued the return for a returner that had stopped, and the slot
// stayed taken in every edge's count for the lease TTL (a minute here).
// Close itself does not wait for the lease.
func TestClusterReleaseAfterCloseReturnsItsSlot(t *testing.T) {
	rs := testredis.Start(t)
	f, led := ledgerFixture(t, oneProviderCfg(t, 2), cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	a := mustAcquire(t, f.d, Request{Model: "m"})
	b := mustAcquire(t, f.d, Request{Model: "m"})
	closed := make(chan struct{})
	// Owner: the test; Close returns without waiting for the leases.
	go func() {
		f.d.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitDeadline):
		t.Fatal("Close waited for leases still held")
	}
	a.Release(ReasonCompleted)
	b.Release(ReasonNodeLost)
	_ = led.Close()
	probe := cluster.Open(cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "probe"})
	defer probe.Close()
	key := cluster.Key("n", "p")
	held, err := probe.Held(context.Background(), []string{key})
	if err != nil {
		t.Fatal(err)
	}
	if held[key] != 0 {
		t.Fatalf("the ledger holds %d lease(s) released after Close, want 0", held[key])
	}
}
