package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A waiter of an edge that is gone is taken out of the wait set by the
// take that finds it, not only passed over: left in, it would be read
// again by every take for 10 × MaxYield and hold one of the places the
// fairness check reads.
func TestTakeDropsWaiterOfGoneEdge(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	b := ledger(t, rs.Addr, "edge-b", 5*time.Second)
	ghost := "edge-gone/w1:0"
	if err := b.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: ghost}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(FairSlack + 50*time.Millisecond)
	if out, err := b.Take(ctx, key, 1, 1, false, b.NewLeaseID(), wait, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("behind a gone edge's waiter: %v %v, want Taken", out, err)
	}
	_, err := b.Client().ZScore(ctx, wait, ghost).Result()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("the gone edge's waiter is still in the wait set (%v)", err)
	}
}

// A wait set expires when no waiter joins it for 10 × MaxYield: a model
// whose requests stopped (or that a reload removed) leaves no key behind
// in Redis.
func TestWaitSetExpires(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	wait := WaitKey("m", 0)
	a := ledger(t, rs.Addr, "edge-a", 5*time.Second)
	if err := a.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: a.NewWaiterID(0)}}); err != nil {
		t.Fatal(err)
	}
	ttl, err := a.Client().PTTL(ctx, wait).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > 10*MaxYield {
		t.Fatalf("wait set's expiry %s, want within %s", ttl, 10*MaxYield)
	}
}

// A request's priority counts as at most MaxShift, as a waiter's does: a
// request with a larger shift still yields to a waiter of another edge
// that arrived before it with the largest shift.
func TestTakeCountsShiftAtMostMaxShift(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	a, b := fairnessPair(t, rs)
	if err := a.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: a.NewWaiterID(MaxShift)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(FairSlack + 50*time.Millisecond)
	if out, err := b.Take(ctx, key, 1, 1, false, b.NewLeaseID(), wait, "", 10*MaxShift, 0); out != Yield || err != nil {
		t.Fatalf("a younger request with a shift past MaxShift: %v %v, want Yield", out, err)
	}
}
