package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A response id is recorded under <prefix>:resp:<id>, raw, holding the
// resource's Key, set only if absent: the edge whose provider answered it
// first keeps it, with the expiry it set, across edges. Ids of any bytes
// stay among these keys.
func TestRememberResponsesFirstKeeps37a(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	ctx := context.Background()
	first := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1", KeyPrefix: "dep"})
	second := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e2", KeyPrefix: "dep"})
	t.Cleanup(func() { _ = first.Close(); _ = second.Close() })

	odd := "resp_\r\n*3\r\n$3\r\nDEL\x00 :lease:n/p"
	if err := first.RememberResponses(ctx, []ResponseOwner{{ID: "resp_1", Key: Key("a", "v")}, {ID: odd, Key: Key("a", "v")}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := second.RememberResponses(ctx, []ResponseOwner{{ID: "resp_1", Key: Key("b", "v")}, {ID: "resp_2", Key: Key("b", "v")}}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"resp_1": Key("a", "v"), odd: Key("a", "v"), "resp_2": Key("b", "v"), "resp_3": ""} {
		for _, l := range []*Ledger{first, second} {
			if got, err := l.ResponseOwner(ctx, id); err != nil || got != want {
				t.Errorf("owner of %q: %q (%v), want %q", id, got, err, want)
			}
		}
	}
	if v := rdb.Get(ctx, "dep:resp:"+odd).Val(); v != Key("a", "v") {
		t.Errorf("the odd id's key holds %q", v)
	}
	keys := rdb.Keys(ctx, "*").Val()
	if len(keys) != 3 {
		t.Errorf("keys %q, want the three ids' only", keys)
	}
	// The first writer's expiry stands (an hour), not the second's.
	if ttl := rdb.TTL(ctx, "dep:resp:resp_1").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("resp_1 expires in %v, want the first writer's hour", ttl)
	}
	if ttl := rdb.TTL(ctx, "dep:resp:resp_2").Val(); ttl <= 0 || ttl > 30*time.Second {
		t.Errorf("resp_2 expires in %v, want 30 s", ttl)
	}
}

// What another program stored under a response key names no resource: a
// value too long is read only up to the bound and answers ""; a key of
// another type is an error reply (ErrRefused); Redis gone is
// ErrUnavailable, within the timeout.
func TestResponseOwnerHostileValues37a(t *testing.T) {
	rs, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	rdb.Set(ctx, "iop:resp:long", strings.Repeat("x", 50<<20), 0)
	rdb.Set(ctx, "iop:resp:bound", strings.Repeat("y", MaxResponseOwnerBytes), 0)
	rdb.LPush(ctx, "iop:resp:list", "a")
	if v, err := l.ResponseOwner(ctx, "long"); v != "" || err != nil {
		t.Errorf("a 50 MB value: %d bytes, %v; want none", len(v), err)
	}
	if v, err := l.ResponseOwner(ctx, "bound"); len(v) != MaxResponseOwnerBytes || err != nil {
		t.Errorf("a value of the bound's length: %d bytes, %v", len(v), err)
	}
	if _, err := l.ResponseOwner(ctx, "list"); !errors.Is(err, ErrRefused) {
		t.Errorf("a list: %v, want ErrRefused", err)
	}
	if err := l.RememberResponses(ctx, []ResponseOwner{{ID: "list", Key: Key("a", "v")}}, time.Hour); err != nil {
		t.Errorf("SET NX over a list: %v (NX leaves any existing key alone)", err)
	}
	if rdb.Type(ctx, "iop:resp:list").Val() != "list" {
		t.Error("the list was replaced")
	}
	rs.Stop()
	if _, err := l.ResponseOwner(ctx, "x"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Redis gone: %v, want ErrUnavailable", err)
	}
	if err := l.RememberResponses(ctx, []ResponseOwner{{ID: "x", Key: Key("a", "v")}}, time.Hour); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Redis gone: %v, want ErrUnavailable", err)
	}
}

// Redis that does not answer (paused for 30 s; the test's end kills it)
// costs a lookup the ledger's timeout, not Redis's time: the lookup fails
// before Redis would answer.
func TestResponseOwnerBounded37a(t *testing.T) {
	rs := testredis.Start(t)
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 500 * time.Millisecond, EdgeID: "e"})
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	if _, err := l.ResponseOwner(ctx, "warm"); err != nil { // the connection made before the pause
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := l.ResponseOwner(ctx, "x"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("paused Redis: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the lookup took %v past a 500 ms timeout", took)
	}
}
