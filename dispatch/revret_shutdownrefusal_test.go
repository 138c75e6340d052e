package dispatch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A batch of the shutdown flush that Redis refuses in part (one lease key
// holds another program's value) does not end the flush: Redis answers,
// so the returns still queued behind it are sent. The old code stopped at
// the first failed batch of any kind, and every return queued past it
// kept its slot taken in the cluster for the lease TTL.
func TestClusterShutdownFlushGoesOnPastARefusal(t *testing.T) {
	rs := testredis.Start(t)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
	f.d.Close() // the returner has ended: the queue is the flush's alone
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	broken, good := cluster.Key("n", "broken"), cluster.Key("n", "good")
	if err := rdb.Set(ctx, broken, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// One batch and a half: the refused return leads the first batch.
	const leases = ledgerBatch + ledgerBatch/2
	f.d.returns <- cluster.Update{Kind: cluster.OpReturn, Key: broken, ID: "e1/broken"}
	expiry := float64(time.Now().Add(time.Hour).UnixMilli())
	for i := range leases {
		id := "e1/g" + strconv.Itoa(i)
		if err := rdb.ZAdd(ctx, good, redis.Z{Score: expiry, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
		f.d.returns <- cluster.Update{Kind: cluster.OpReturn, Key: good, ID: id}
	}
	f.d.flushReturns(nil, unsureReadds{}, time.Minute)
	if n := rdb.ZCard(ctx, good).Val(); n != 0 {
		t.Fatalf("%d of %d leases queued behind a refused batch still held after the shutdown flush", n, leases)
	}
}
