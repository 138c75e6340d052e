package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A fenced return works on a Redis restarted with an empty script cache
// (its script is sent whole, never by its SHA alone, which a pipeline
// cannot resend after NOSCRIPT): the lease is removed and marked.
func TestFencedReturnAfterARedisRestart(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := ledger(t, rs.Addr, "e", time.Minute)
	key := Key("n", "p")
	fenced := func() string {
		t.Helper()
		id := l.NewLeaseID()
		if out, err := l.Take(ctx, key, 2, 2, true, id, "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("take: %v %v", out, err)
		}
		if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id, Fence: true}}); err != nil {
			t.Fatalf("fenced return: %v", err)
		}
		return id
	}
	fenced() // the script is in Redis's cache
	rs.Restart()
	id := fenced()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	for _, k := range []string{key, key + ":long"} {
		if n, err := rdb.ZCard(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("%s holds %d leases after the fenced return (%v)", k, n, err)
		}
	}
	if n, err := rdb.Exists(ctx, l.returnedKey(id)).Result(); err != nil || n != 1 {
		t.Fatalf("the fenced return left no mark: %d %v", n, err)
	}
}
