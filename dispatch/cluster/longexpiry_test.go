package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// An expired long lease stops counting against the long capacity as it
// stops counting against the capacity, even while the long set lives on
// (another edge's long lease keeps it): a crashed edge's long leases free
// their long slots after the TTL, not only when the set's key expires.
func TestExpiredLongLeaseFreesItsLongSlot(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key := Key("n", "p")
	a := ledger(t, rs.Addr, "a", 200*time.Millisecond)
	b := ledger(t, rs.Addr, "b", 30*time.Second)
	if out, err := a.Take(ctx, key, 4, 2, true, a.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("a's long take: %v %v", out, err)
	}
	if out, err := b.Take(ctx, key, 4, 2, true, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("b's long take: %v %v", out, err)
	}
	// a stops renewing (it crashed): wait until Redis's clock passes its
	// lease's expiry.
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := b.Held(ctx, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		if held[key] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's lease never expired: held %v", held)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := b.Take(ctx, key, 4, 2, true, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("long take after a's long lease expired: %v %v, want Taken", out, err)
	}
}
