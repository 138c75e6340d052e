package cluster

import (
	"context"
	"maps"
	"testing"
	"time"
)

// A tick's figures replace the edge's last ones whole: a model no longer
// waiting is gone from the edge's hash (and from every status), not left
// with its old count until the hash expires. The set of publishing edges
// lives three TTLs (a crashed edge's entry outlives its figures, which
// Pending then removes), longer than one.
func TestATicksFiguresReplaceTheLastOnes(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	for _, pending := range []map[string]int{{"a": 1, "b": 2}, {"a": 3}} {
		if r := l.Tick(ctx, nil, pending); r.Renew != nil || r.Alive != nil || r.Pending != nil {
			t.Fatalf("tick with %v: %+v", pending, r)
		}
	}
	got, err := rdb.HGetAll(ctx, l.pendingKeys+"e").Result()
	if err != nil || !maps.Equal(got, map[string]string{"a": "3"}) {
		t.Fatalf("figures after the second tick: %v %v; want only a: 3", got, err)
	}
	if ttl := rdb.PTTL(ctx, l.pendingEdges).Val(); ttl <= time.Minute || ttl > 3*time.Minute {
		t.Fatalf("set of publishing edges expires in %v; want within three TTLs of a minute, past one", ttl)
	}
	if ttl := rdb.PTTL(ctx, l.pendingKeys+"e").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("figures expire in %v; want within the TTL", ttl)
	}
}
