package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A return of a lease Redis lost (a restart without persistence, a flush,
// an eviction) announces nothing, as a return of a lease Redis never held
// does (the script cannot tell them apart): the slot was freed when Redis
// lost the lease, and every take since then counted it free, so a waiter
// of another edge that asked after the loss already had its answer, and
// one that asked before retries on its own backoff (200 ms in the
// dispatcher). Two edges on one Redis: edge 2, told Full while edge 1
// held the only slot, is granted it once Redis lost the lease, before
// edge 1 returns it; edge 1's return then announces nothing (a return of
// a lease it still holds, on another resource, is announced as ever) and
// leaves edge 2's lease alone.
func TestReturnOfALeaseRedisLostAnnouncesNothing(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	ctx := context.Background()
	e1, e2 := ledger(t, rs.Addr, "e1", time.Minute), ledger(t, rs.Addr, "e2", time.Minute)
	freed := subscribed(t, rdb, e2.FreedChannel())
	lostKey, heldKey := Key("n", "lost"), Key("n", "held")
	lost, held := e1.NewLeaseID(), e1.NewLeaseID()
	for _, tk := range []struct{ key, id string }{{lostKey, lost}, {heldKey, held}} {
		if out, err := e1.Take(ctx, tk.key, 1, 1, false, tk.id, "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("edge 1 take on %s: %v %v", tk.key, out, err)
		}
	}
	if out, err := e2.Take(ctx, lostKey, 1, 1, false, e2.NewLeaseID(), "", "", 0, 0); out != Full || err != nil {
		t.Fatalf("edge 2 take while edge 1 holds the slot: %v %v, want Full", out, err)
	}
	if err := rdb.Del(ctx, lostKey).Err(); err != nil { // Redis loses edge 1's lease
		t.Fatal(err)
	}
	waiter := e2.NewLeaseID()
	if out, err := e2.Take(ctx, lostKey, 1, 1, false, waiter, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("edge 2 take after Redis lost the lease: %v %v, want Taken (the slot is free from the loss on)", out, err)
	}
	if err := e1.Apply(ctx, []Update{{Kind: OpReturn, Key: lostKey, ID: lost}}); err != nil {
		t.Fatal(err)
	}
	if err := e1.Apply(ctx, []Update{{Kind: OpReturn, Key: heldKey, ID: held}}); err != nil {
		t.Fatal(err)
	}
	if got := announcements(t, e1, freed, "sentinel"); !slices.Equal(got, []string{heldKey}) {
		t.Fatalf("announced %q, want only %s (the lost lease's return announces nothing)", got, heldKey)
	}
	if !inSet(t, rdb, lostKey, waiter) {
		t.Fatal("edge 1's return of its lost lease removed edge 2's lease")
	}
}
