package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// The shutdown flush fences the returns of leases whose re-add is unsure,
// as the returner's own batches do: Close may find such a return still
// queued, and its re-add may still reach Redis after it. A return of a
// lease whose re-add is known is sent plain.
func TestShutdownFlushFencesReturnsOfUnsureReadds(t *testing.T) {
	rs := testredis.Start(t)
	f, _ := ledgerFixture(t, oneProviderCfg(t, 2), cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	f.d.Close() // the returner has sent its last batch
	key := cluster.Key("n", "p")
	const unsure, known = "e1/unsure-1", "e1/known-2"
	f.d.returns <- cluster.Update{Kind: cluster.OpReturn, Key: key, ID: unsure}
	f.d.returns <- cluster.Update{Kind: cluster.OpReturn, Key: key, ID: known}
	f.d.flushReturns(nil, unsureReadds{unsure: time.Now()}, time.Minute)

	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	ctx := context.Background()
	if n := rdb.Exists(ctx, "iop:returned:"+unsure).Val(); n != 1 {
		t.Fatal("the flushed return of a lease whose re-add is unsure was not fenced")
	}
	if n := rdb.Exists(ctx, "iop:returned:"+known).Val(); n != 0 {
		t.Fatal("the flushed return of a lease with no unsure re-add was fenced")
	}
}
