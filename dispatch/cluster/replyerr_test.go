package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// A batch that Redis answers, refusing some of its updates with an error
// reply (a lease key holding another program's value; Redis out of
// memory), is ErrRefused, not ErrUnavailable: nothing of it is still on
// its way, and the updates Redis accepted are applied. The old code
// called every failed batch ErrUnavailable, as if Redis had not answered.
func TestApplyErrorReplyIsRefusedNotUnavailable(t *testing.T) {
	rs, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	broken, good := brokenAndGood(t, l, rdb)
	err := l.Apply(ctx, []Update{
		{Kind: OpReturn, Key: broken, ID: "e/0"},
		{Kind: OpReturn, Key: good, ID: "e/1"},
	})
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) || ReplyKind(err) != "WRONGTYPE" {
		t.Fatalf("apply with a key of another type: %v (kind %q); want %v of kind WRONGTYPE", err, ReplyKind(err), ErrRefused)
	}
	if n := rdb.ZCard(ctx, good).Val(); n != 0 {
		t.Fatalf("the return Redis accepted in a refused batch was not applied: %d leases left", n)
	}

	// Out of memory: the fenced return's mark (SET) is refused.
	restore := rs.OutOfMemory(t)
	err = l.Apply(ctx, []Update{{Kind: OpReturn, Key: good, ID: "e/2", Fence: true}})
	restore()
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) || ReplyKind(err) != "OOM" {
		t.Fatalf("apply out of memory: %v (kind %q); want %v of kind OOM", err, ReplyKind(err), ErrRefused)
	}
}

// A batch Redis did not answer stays ErrUnavailable, with no reply kind.
func TestApplyUnansweredIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more: the dial is refused
	l := ledger(t, addr, "e", time.Minute)
	err = l.Apply(context.Background(), []Update{{Kind: OpReturn, Key: Key("n", "p"), ID: "e/1"}})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) || ReplyKind(err) != "" {
		t.Fatalf("apply with Redis unreachable: %v (kind %q); want %v", err, ReplyKind(err), ErrUnavailable)
	}
	if err := l.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ping with Redis unreachable: %v, want %v", err, ErrUnavailable)
	}
}
