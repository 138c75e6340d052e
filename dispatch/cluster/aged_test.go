package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A waiter whose place in the wait set is gone (aged out after
// 10 × MaxYield while its edge still queues it, or its registration
// dropped) is ordered by how long it has waited on its edge, not as if it
// had just arrived: it does not yield to a younger waiter of another edge.
func TestTakeOrdersWaiterMissingFromWaitSetByItsWait(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	a, b := ledger(t, rs.Addr, "edge-a", 5*time.Second), ledger(t, rs.Addr, "edge-b", 5*time.Second)
	for _, l := range []*Ledger{a, b} {
		if err := l.Alive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// edge-b's waiter arrived a second ago; edge-a's has waited 25 s, and
	// its entry has aged out of the set.
	younger := b.NewWaiterID(0)
	old := a.NewWaiterID(0)
	if err := rdb.ZAdd(ctx, wait,
		redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: younger},
		redis.Z{Score: float64(now.Add(-25 * time.Second).UnixMilli()), Member: old}).Err(); err != nil {
		t.Fatal(err)
	}
	// Any take on the wait set prunes the entries older than 10 × MaxYield.
	if out, err := b.Take(ctx, Key("n", "q"), 4, 4, false, b.NewLeaseID(), wait, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("a take of edge-b: %v %v, want Taken", out, err)
	}
	if n, err := rdb.ZScore(ctx, wait, old).Result(); err != redis.Nil {
		t.Fatalf("the old entry was not pruned: %v %v", n, err)
	}
	if out, err := a.Take(ctx, key, 4, 4, false, a.NewLeaseID(), wait, old, 0, 25*time.Second); out != Taken || err != nil {
		t.Fatalf("a waiter of 25 s behind one of 1 s: %v %v, want Taken", out, err)
	}
	// The younger waiter still goes before a fresh request of edge-a.
	if out, err := a.Take(ctx, key, 4, 4, false, a.NewLeaseID(), wait, "", 0, 0); out != Yield || err != nil {
		t.Fatalf("a fresh request behind a waiter of 1 s: %v %v, want Yield", out, err)
	}
}
