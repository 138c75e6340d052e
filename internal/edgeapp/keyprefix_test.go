package edgeapp

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// cluster.redis.key_prefix reaches the ledger: the edge marks itself live
// under its deployment's prefix, and writes nothing under the default one.
func TestEdgeUsesItsRedisKeyPrefix(t *testing.T) {
	rs := testredis.Start(t)
	_, cfg := edgeFile(t, "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0'}\n"+
		"cluster: {redis: {address: '"+rs.Addr+"', key_prefix: blue}}\n"+oneNodeYAML)
	serveEdge(t, cfg, Options{HealthInterval: -1})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			if len(keys) != 1 || len(keys[0]) < len("blue:edge:") || keys[0][:len("blue:edge:")] != "blue:edge:" {
				t.Fatalf("keys %q, want only blue:edge:<edge id>", keys)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the edge wrote no key")
		}
		time.Sleep(time.Millisecond)
	}
}
