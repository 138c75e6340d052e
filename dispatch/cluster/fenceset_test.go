package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A fenced return whose mark Redis refuses (out of memory: SET may grow
// it, ZREM may not) takes no effect at all: the lease stays in the ledger
// (it expires within the TTL, or its return is sent again), never removed
// unfenced, where a re-add still on its way would put it back for the
// TTL. The old code sent the mark and the removals as separate commands:
// the removals ran, the mark did not.
func TestFencedReturnRefusedMarkLeavesTheLeaseAlone(t *testing.T) {
	rs, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	id := l.NewLeaseID()
	if out, err := l.Take(ctx, key, 2, 2, true, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	restore := rs.OutOfMemory(t)
	err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id, Fence: true}})
	restore()
	if !errors.Is(err, ErrRefused) || ReplyKind(err) != "OOM" {
		t.Fatalf("fenced return out of memory: %v (kind %q); want %v of kind OOM", err, ReplyKind(err), ErrRefused)
	}
	fenced := rdb.Exists(ctx, l.returnedKey(id)).Val() == 1
	for _, k := range []string{key, key + ":long"} {
		if _, zerr := rdb.ZScore(ctx, k, id).Result(); errors.Is(zerr, redis.Nil) && !fenced {
			t.Fatalf("the lease was removed from %s without its fence", k)
		}
	}

	// Once Redis takes writes again the same return is fenced and made,
	// and a late re-add does not put the lease back.
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id, Fence: true}}); err != nil {
		t.Fatalf("fenced return: %v", err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReadd, Key: key, ID: id, Long: true}}); err != nil {
		t.Fatalf("late re-add: %v", err)
	}
	for _, k := range []string{key, key + ":long"} {
		if n := rdb.ZCard(ctx, k).Val(); n != 0 {
			t.Fatalf("%s holds %d leases after the fenced return and a late re-add", k, n)
		}
	}
}

// A fenced return still removes the lease from both sets, announces its
// key once with the batch's other returns, and reports a lease key of
// another type as a refusal of kind WRONGTYPE (the mark is written: the
// lease is not counted there anyway).
func TestFencedReturnScriptRemovesAndAnnounces(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, FreedChannel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	key := Key("n", "p")
	a, b := l.NewLeaseID(), l.NewLeaseID()
	for _, id := range []string{a, b} {
		if out, err := l.Take(ctx, key, 2, 2, true, id, "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("take: %v %v", out, err)
		}
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: a, Fence: true}, {Kind: OpReturn, Key: key, ID: b}}); err != nil {
		t.Fatal(err)
	}
	if n, m := rdb.ZCard(ctx, key).Val(), rdb.ZCard(ctx, key+":long").Val(); n != 0 || m != 0 {
		t.Fatalf("%d leases and %d long leases left", n, m)
	}
	if ttl := rdb.PTTL(ctx, l.returnedKey(a)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the fence's expiry is %v, want within the TTL", ttl)
	}
	if rdb.Exists(ctx, l.returnedKey(b)).Val() != 0 {
		t.Fatal("an unfenced return wrote a fence")
	}
	select {
	case m := <-sub.Channel():
		if m.Payload != key {
			t.Fatalf("announced %q, want %q", m.Payload, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the returns were never announced")
	}

	broken := Key("n", "broken")
	if err := rdb.Set(ctx, broken, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: broken, ID: "e/9", Fence: true}})
	if !errors.Is(err, ErrRefused) || ReplyKind(err) != "WRONGTYPE" {
		t.Fatalf("fenced return on a key of another type: %v (kind %q); want %v of kind WRONGTYPE", err, ReplyKind(err), ErrRefused)
	}
	if v := rdb.Get(ctx, broken).Val(); v != "someone else's" {
		t.Fatalf("the other program's key changed to %q", v)
	}
}
