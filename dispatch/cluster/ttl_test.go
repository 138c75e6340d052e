package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Edges configured with different lease TTLs (lease_ttl_sec changed in a
// rolling restart) share a resource: the shorter TTL's take or renewal
// must not cut the expiry of the resource's key below that of a longer
// lease it holds, or Redis would delete a live, renewed lease of another
// edge with the key, and the cluster admit more than the capacity.
func TestShortTTLEdgeDoesNotExpireLongerLeases(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key := Key("n", "p")
	long := ledger(t, rs.Addr, "long", time.Minute)
	short := ledger(t, rs.Addr, "short", time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()

	held := long.NewLeaseID()
	if out, err := long.Take(ctx, key, 4, 4, true, held, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	// outlives reports whether both of key's sorted sets live at least
	// as long as the long edge's lease.
	outlives := func(step string) {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		score, err := rdb.ZScore(ctx, key, held).Result()
		if err != nil {
			t.Fatalf("%s: the long lease is gone: %v", step, err)
		}
		left := time.Duration(int64(score)-now.UnixMilli()) * time.Millisecond
		for _, k := range []string{key, key + ":long"} {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl < left {
				t.Fatalf("%s: %s expires in %v, before the lease it holds (%v)", step, k, ttl, left)
			}
		}
	}
	outlives("taken")

	mine := short.NewLeaseID()
	if out, err := short.Take(ctx, key, 4, 4, true, mine, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	outlives("after the short edge's take")
	if _, err := short.Renew(ctx, map[string][]HeldLease{key: {{ID: mine, Long: true}}}); err != nil {
		t.Fatal(err)
	}
	outlives("after the short edge's renewal")
	if _, err := long.Renew(ctx, map[string][]HeldLease{key: {{ID: held, Long: true}}}); err != nil {
		t.Fatal(err)
	}
	outlives("after the long edge's renewal")
}
