package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// The cluster loop's first tick runs at its start and, refused, is tried
// again soon: an edge that starts while Redis refuses writes (out of
// memory) is marked live, its waiters counted by the other edges' takes,
// within seconds of Redis accepting them again, not at the first TTL/3
// tick (20 s here). Before, the first liveness mark was a call of its
// own, its failure ignored, and the mark waited for that tick.
func TestAnEdgeIsMarkedLiveSoonAfterARefusedFirstTick(t *testing.T) {
	rs := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	restore := rs.OutOfMemory(t)
	closedLedgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
	waitFor(t, "the first liveness mark refused", func() bool {
		return clustertest.InfoField(t, rdb, "errorstats", "errorstat_OOM:", "count") > 0
	})
	restore()
	ctx := context.Background()
	waitFor(t, "the edge marked live", func() bool { return rdb.Exists(ctx, "iop:edge:e1").Val() == 1 })
	if ttl := rdb.PTTL(ctx, "iop:edge:e1").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("liveness mark expires in %v, want within the TTL", ttl)
	}
}
