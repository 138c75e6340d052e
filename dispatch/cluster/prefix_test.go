package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// prefixed opens a ledger of edge under prefix on addr, closed at cleanup.
func prefixed(t *testing.T, addr, edge, prefix string) *Ledger {
	t.Helper()
	l := Open(Config{Address: addr, TTL: time.Minute, Timeout: time.Second, EdgeID: edge, KeyPrefix: prefix})
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// subscribed subscribes rdb to channel and waits for the confirmation, so
// that nothing published afterwards is missed.
func subscribed(t *testing.T, rdb *redis.Client, channel string) <-chan *redis.Message {
	t.Helper()
	sub := rdb.Subscribe(context.Background(), channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sub.Channel()
}

// Without a prefix the ledger writes the keys and channel edges of earlier
// versions use, byte for byte: a cluster can be upgraded one edge at a
// time.
func TestDefaultPrefixKeepsTheKeyNames(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := prefixed(t, rs.Addr, "e1", "")
	rdb := l.Client()
	freed := subscribed(t, redis.NewClient(&redis.Options{Addr: rs.Addr}), "iop:freed")
	id := l.NewLeaseID()
	if out, err := l.Take(ctx, Key("n", "p"), 1, 1, true, id, WaitKey("m", 0), "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpWait, Key: WaitKey("m", 0), ID: "e1/w9:0"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Alive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.SetPending(ctx, map[string]int{"m": 1}); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"iop:edge:e1", "iop:lease:n/p", "iop:lease:n/p:long", "iop:pending-edges", "iop:pending:e1", "iop:wait:m:0"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: Key("n", "p"), ID: id}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-freed:
		if m.Payload != "iop:lease:n/p" {
			t.Fatalf("announcement %q, want iop:lease:n/p", m.Payload)
		}
		if got := l.FreedKey(m.Payload); got != Key("n", "p") {
			t.Fatalf("FreedKey(%q) = %q, want %q", m.Payload, got, Key("n", "p"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement on iop:freed")
	}
}

// Two deployments on one Redis with different prefixes share nothing:
// each grants its own capacity, a waiter of one is not yielded to by the
// other, each sees its own pending figures, and a return is announced on
// its own deployment's channel only (pub/sub ignores the database, so
// different db numbers could not keep announcements apart).
func TestPrefixesKeepDeploymentsApart(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a, b := prefixed(t, rs.Addr, "a1", "blue"), prefixed(t, rs.Addr, "b1", "green")
	key, wait := Key("n", "p"), WaitKey("m", 0)
	aFreed := subscribed(t, redis.NewClient(&redis.Options{Addr: rs.Addr}), a.FreedChannel())
	bFreed := subscribed(t, redis.NewClient(&redis.Options{Addr: rs.Addr}), b.FreedChannel())
	if a.FreedChannel() != "blue:freed" || b.FreedChannel() != "green:freed" {
		t.Fatalf("channels %q, %q", a.FreedChannel(), b.FreedChannel())
	}

	// b's waiter, registered long before a's request and live, would make
	// a's take yield if the deployments shared the wait set.
	for _, l := range []*Ledger{a, b} {
		if err := l.Alive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: b.NewWaiterID(MaxShift)}}); err != nil {
		t.Fatal(err)
	}
	aID := a.NewLeaseID()
	if out, err := a.Take(ctx, key, 1, 1, false, aID, wait, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("blue take beside green's waiter: %v %v, want Taken", out, err)
	}
	bID := b.NewLeaseID()
	if out, err := b.Take(ctx, key, 1, 1, false, bID, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("green take of a capacity of 1 blue holds: %v %v, want Taken", out, err)
	}
	if out, err := a.Take(ctx, key, 1, 1, false, a.NewLeaseID(), "", "", 0, 0); out != Full || err != nil {
		t.Fatalf("second blue take: %v %v, want Full", out, err)
	}
	for _, l := range []*Ledger{a, b} {
		if held, err := l.Held(ctx, []string{key}); err != nil || held[key] != 1 {
			t.Fatalf("%s holds %v (%v), want 1", l.prefix, held, err)
		}
	}
	if err := a.SetPending(ctx, map[string]int{"m": 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPending(ctx, map[string]int{"m": 5}); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Pending(ctx); err != nil || p["m"] != 2 {
		t.Fatalf("blue pending %v (%v), want m: 2", p, err)
	}

	// Every key is under its deployment's prefix.
	keys, err := a.Client().Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !(len(k) > 5 && k[:5] == "blue:") && !(len(k) > 6 && k[:6] == "green:") {
			t.Errorf("key %q is under neither prefix", k)
		}
	}

	if err := a.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: aID}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-aFreed:
		if m.Payload != "blue:lease:n/p" || a.FreedKey(m.Payload) != key {
			t.Fatalf("blue announcement %q (key %q)", m.Payload, a.FreedKey(m.Payload))
		}
		if b.FreedKey(m.Payload) != "" {
			t.Fatalf("green reads blue's announcement as key %q", b.FreedKey(m.Payload))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement on blue:freed")
	}
	// Redis delivers to a subscriber in publication order: green's own return
	// comes after anything blue's could have put on green's channel.
	if err := b.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: bID}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-bFreed:
		if m.Payload != "green:lease:n/p" {
			t.Fatalf("green's first announcement %q, want its own return", m.Payload)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement on green:freed")
	}
	if held, err := b.Held(ctx, []string{key}); err != nil || held[key] != 0 {
		t.Fatalf("green holds %v (%v) after its return, want 0", held, err)
	}
}
