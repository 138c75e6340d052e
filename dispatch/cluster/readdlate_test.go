package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A fenced return marks its lease returned, under the ledger's prefix and
// for the TTL: an OpReadd of that lease run after it (one that came late)
// puts nothing back, long set included. An unfenced return leaves no mark:
// the re-add of another lease of the key is made as before.
func TestReaddAfterFencedReturnIsRefused(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "a", KeyPrefix: "blue"})
	defer l.Close()
	key := Key("n", "p")
	fenced, plain := l.NewLeaseID(), l.NewLeaseID()
	if err := l.Apply(ctx, []Update{
		{Kind: OpReturn, Key: key, ID: fenced, Fence: true},
		{Kind: OpReturn, Key: key, ID: plain},
		{Kind: OpReadd, Key: key, ID: fenced, Long: true},
		{Kind: OpReadd, Key: key, ID: plain},
	}); err != nil {
		t.Fatal(err)
	}
	held, err := l.Held(ctx, []string{key, key + ":long"})
	if err != nil || held[key] != 1 || held[key+":long"] != 0 {
		t.Fatalf("held %v (%v), want only the unfenced lease, not long", held, err)
	}
	at := "blue:lease:n/p"
	if n := l.Client().ZScore(ctx, at, plain).Val(); n == 0 {
		t.Fatalf("the unfenced lease is not in %s", at)
	}
	mark := "blue:returned:" + fenced
	ttl, err := l.Client().PTTL(ctx, mark).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("mark %s expires in %v (%v), want within the TTL", mark, ttl, err)
	}
	if n := l.Client().Exists(ctx, "blue:returned:"+plain).Val(); n != 0 {
		t.Fatal("an unfenced return left a mark")
	}
}
