package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A waiter's priority (its shift) orders it across edges as it does in
// its own edge's queue: a request of another edge yields to a waiter of
// higher priority that has just arrived, and MaxYield counts the time the
// waiter has actually waited, not its shifted place.
func TestTakeYieldsToHigherPriorityWaiterOfAnotherEdge(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	a, b := fairnessPair(t, rs)
	const prio = 5 * time.Second // one priority level
	w := a.NewWaiterID(prio)
	if err := a.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: w}}); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Take(ctx, key, 4, 4, false, b.NewLeaseID(), wait, "", 0, 0); out != Yield || err != nil {
		t.Fatalf("behind a waiter of higher priority on another edge: %v %v, want Yield", out, err)
	}
	if out, err := b.Take(ctx, key, 4, 4, false, b.NewLeaseID(), wait, "", 2*prio, 0); out != Taken || err != nil {
		t.Fatalf("a request of higher priority still: %v %v, want Taken", out, err)
	}
	if err := a.Apply(ctx, []Update{{Kind: OpUnwait, Key: wait, ID: w}}); err != nil {
		t.Fatal(err)
	}

	// The same waiter, having waited three seconds (past MaxYield): no
	// longer yielded to.
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	stale := a.NewWaiterID(prio)
	arrived := now.Add(-3 * time.Second)
	if err := rdb.ZAdd(ctx, wait, redis.Z{Score: float64(arrived.UnixMilli()), Member: stale}).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Take(ctx, key, 4, 4, false, b.NewLeaseID(), wait, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("behind a waiter that has waited past MaxYield: %v %v, want Taken", out, err)
	}
}

// fairnessPair is two edges' ledgers on rs, edge-a and edge-b (5 s lease
// TTL), edge-a announced alive so that b's takes see a's waiters.
func fairnessPair(t *testing.T, rs *testredis.Server) (a, b *Ledger) {
	t.Helper()
	a, b = ledger(t, rs.Addr, "edge-a", 5*time.Second), ledger(t, rs.Addr, "edge-b", 5*time.Second)
	if err := a.Alive(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, b
}
