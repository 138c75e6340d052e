package cluster

import (
	"context"
	"testing"
	"time"
)

// A take that got no answer may reach Redis after the fenced return its
// edge sent for it (its bytes held up on another connection): it then
// takes nothing, and the slot stays free for the other takes. Run in
// that order through the ledger's API: the return of an id not held yet,
// then its take, answered Full, leaves the resource's set empty (no wait
// set touched either), and the next take of another id is granted the
// only slot. Before, the late take added a lease no edge holds, renews
// or returns, the slot taken in every edge's count for the TTL.
func TestALateTakeOfAReturnedIDTakesNothing(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	id := l.NewLeaseID()
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id, Fence: true}}); err != nil {
		t.Fatal(err)
	}
	out, err := l.Take(ctx, key, 1, 1, true, id, wait, "", 0, 0)
	if err != nil || out != Full {
		t.Fatalf("late take of a returned id: %v %v, want Full", out, err)
	}
	for _, k := range []string{key, key + ":long", wait} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("%s after the late take: exists %d (%v), want no key", k, n, err)
		}
	}
	other := l.NewLeaseID()
	if out, err := l.Take(ctx, key, 1, 1, false, other, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take after the late one: %v %v, want Taken (the only slot is free)", out, err)
	}
	if n := rdb.ZCard(ctx, key).Val(); n != 1 || !inSet(t, rdb, key, other) {
		t.Fatalf("%d leases, want only %s", n, other)
	}
	// The mark lives the TTL, as a re-add's fence does: bounded.
	if ttl := rdb.PTTL(ctx, l.returnedKey(id)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("returned mark's expiry %v, want within the TTL", ttl)
	}
}

// A plain return (no fence) leaves no mark, and a take of its id after it
// is granted as ever: only the returns of takes that got no answer are
// fenced, so a take is never refused for another reason.
func TestATakeAfterAPlainReturnIsGranted(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	id := l.NewLeaseID()
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Take(ctx, key, 1, 1, false, id, "", "", 0, 0); out != Taken || err != nil || !inSet(t, rdb, key, id) {
		t.Fatalf("take after a plain return: %v %v", out, err)
	}
}
