package cluster

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A crashed edge's pending figures stop counting once its TTL has passed
// without a refresh: the figures' hash expires with it.
func TestPendingOfCrashedEdgeExpires(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := ledger(t, rs.Addr, "a", time.Minute)
	crashed := ledger(t, rs.Addr, "crashed", 200*time.Millisecond)
	if err := crashed.SetPending(ctx, map[string]int{"m": 7}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPending(ctx, map[string]int{"m": 1}); err != nil {
		t.Fatal(err)
	}
	// The set of publishing edges expires too once none publishes.
	if ttl, err := a.Client().PTTL(ctx, a.pendingEdges).Result(); err != nil || ttl <= 0 || ttl > 3*time.Minute {
		t.Fatalf("expiry of the publishing edges' set: %s (%v), want within three TTLs", ttl, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := a.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if maps.Equal(got, map[string]int{"m": 1}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending = %v long past the crashed edge's TTL, want only a's", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Figures that are not a positive count (a key another program wrote
// under the iop: prefix) are not summed: a status never shows a model
// with zero or fewer requests waiting.
func TestPendingSkipsFiguresThatAreNotCounts(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := ledger(t, rs.Addr, "a", time.Minute)
	if err := a.SetPending(ctx, map[string]int{"m": 2}); err != nil {
		t.Fatal(err)
	}
	if err := a.Client().HSet(ctx, a.pendingKeys+"a", "zero", 0, "negative", -5, "text", "x").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := a.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"m": 2}; !maps.Equal(got, want) {
		t.Fatalf("pending = %v, want %v", got, want)
	}
}
