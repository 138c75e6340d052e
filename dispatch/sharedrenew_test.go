package dispatch

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// A lease held longer than the TTL stays in the ledger: the cluster loop
// renews it (its expiry moves on), so that the other edges do not see its
// slot free while it is in use.
func TestClusterHeldLeaseIsRenewed(t *testing.T) {
	f, rs := oneSlotCluster(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	defer l.Release(ReasonCompleted)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	ctx := context.Background()
	key := cluster.Key("n", "p")
	first, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil || len(first) != 1 {
		t.Fatalf("ledger after the grant: %v (%v), want one lease", first, err)
	}
	waitFor(t, "the held lease renewed", func() bool {
		now, err := rdb.ZScore(ctx, key, first[0].Member.(string)).Result()
		return err == nil && now > first[0].Score
	})
}
