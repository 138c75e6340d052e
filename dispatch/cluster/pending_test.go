package cluster

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// The edges' pending figures are found without walking the database:
// on a Redis shared with a million other keys, Pending answers within a
// short timeout, counts each edge once, and forgets an edge whose figures
// expired.
func TestPendingOnABusyDatabase(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, ReadTimeout: -1, MaxRetries: -1})
	defer rdb.Close()
	fill := `for i = ARGV[1], ARGV[1] + 99999 do redis.call('SET', 'other:' .. i, '1') end return 1`
	for from := 0; from < 1_000_000; from += 100_000 {
		if err := rdb.Eval(ctx, fill, nil, from).Err(); err != nil {
			t.Fatal(err)
		}
	}
	open := func(edge string, ttl time.Duration) *Ledger {
		l := Open(Config{Address: rs.Addr, TTL: ttl, Timeout: 500 * time.Millisecond, EdgeID: edge})
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b, gone := open("a", time.Minute), open("b", time.Minute), open("gone", time.Minute)
	for l, p := range map[*Ledger]map[string]int{a: {"m": 2, "n": 1}, b: {"m": 3}, gone: {"m": 100}} {
		if err := l.SetPending(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Del(ctx, a.pendingKeys+"gone").Err(); err != nil { // as if expired
		t.Fatal(err)
	}
	got, err := a.Pending(ctx)
	if err != nil {
		t.Fatalf("pending: %v", err)
	}
	if want := map[string]int{"m": 5, "n": 1}; !maps.Equal(got, want) {
		t.Fatalf("pending = %v, want %v", got, want)
	}
	if err := b.SetPending(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Pending(ctx); err != nil || !maps.Equal(got, map[string]int{"m": 2, "n": 1}) {
		t.Fatalf("after b has none: %v %v", got, err)
	}
	// Neither the expired edge nor the one with none is read again: edges
	// that are gone would otherwise fill the maxEdges read.
	edges, err := rdb.SMembers(ctx, a.pendingEdges).Result()
	if err != nil || len(edges) != 1 || edges[0] != "a" {
		t.Fatalf("edges with pending figures: %v (%v), want only a", edges, err)
	}
}
