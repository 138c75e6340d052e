package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// The long capacity is counted across edges: a second long lease is
// refused at long capacity 1 while short ones are still granted.
func TestLongCapacityCountsAcrossEdges(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key := Key("n", "p")
	a, b := ledger(t, rs.Addr, "a", 30*time.Second), ledger(t, rs.Addr, "b", 30*time.Second)
	if out, err := a.Take(ctx, key, 3, 1, true, a.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("first long take: %v %v", out, err)
	}
	if out, err := b.Take(ctx, key, 3, 1, true, b.NewLeaseID(), "", "", 0, 0); out != Full || err != nil {
		t.Fatalf("second long take at long capacity 1: %v %v, want Full", out, err)
	}
	if out, err := b.Take(ctx, key, 3, 1, false, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("short take beside the long lease: %v %v, want Taken", out, err)
	}
}

// Renewal keeps a long lease counted against the long capacity, not only
// against the capacity: past its first TTL, another long lease is still
// refused (renewed through two TTLs of 1 s: renewThrough).
func TestRenewKeepsLongLeaseCounted(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key := Key("n", "p")
	const ttl = time.Second
	a, b := ledger(t, rs.Addr, "a", ttl), ledger(t, rs.Addr, "b", ttl)
	id := a.NewLeaseID()
	from := time.Now() // the take's start (renewThrough)
	if out, err := a.Take(ctx, key, 3, 1, true, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("long take: %v %v", out, err)
	}
	renewThrough(t, a, key, HeldLease{ID: id, Long: true}, ttl, from)
	if out, err := b.Take(ctx, key, 3, 1, true, b.NewLeaseID(), "", "", 0, 0); out != Full || err != nil {
		t.Fatalf("long take beside a renewed long lease: %v %v, want Full", out, err)
	}
}

// A lease that expired is not brought back by a late renewal (an edge
// whose renewal came after the TTL, e.g. Redis was slow): its slot stays
// free for the other edges.
func TestRenewDoesNotBringBackExpiredLease(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key := Key("n", "p")
	const ttl = 200 * time.Millisecond
	a, b := ledger(t, rs.Addr, "a", ttl), ledger(t, rs.Addr, "b", ttl)
	id := a.NewLeaseID()
	if out, err := a.Take(ctx, key, 1, 1, false, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := a.Held(ctx, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		if held[key] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	missing, err := a.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := missing[key]; len(got) != 1 || got[0] != id {
		t.Fatalf("renewal reported %v missing, want [%s]", missing, id)
	}
	if held, err := a.Held(ctx, []string{key}); err != nil || held[key] != 0 {
		t.Fatalf("after a late renewal held %v (%v), want 0", held, err)
	}
	if out, err := b.Take(ctx, key, 1, 1, false, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take of the expired lease's slot: %v %v, want Taken", out, err)
	}
}
