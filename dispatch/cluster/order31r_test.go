package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// A batch that puts back two leases of one resource and returns each
// after its re-add (re-add A, return A, re-add B, return B; A long and
// fenced, B plain: no mark keeps B's re-add out) leaves neither in the ledger and announces the
// resource once: the returns, made together where the last of them
// stands, still follow every re-add of their leases. Made where the
// first of them stands, the return of B would run before B is put back,
// which would then hold its slot for the TTL.
func TestGroupedReturnsFollowEveryReaddOfTheirLeases(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	ch := subscribed(t, rdb, l.FreedChannel())
	key := Key("n", "p")
	a, b := l.NewLeaseID(), l.NewLeaseID()
	if err := l.Apply(ctx, []Update{
		{Kind: OpReadd, Key: key, ID: a, Long: true},
		{Kind: OpReturn, Key: key, ID: a, Fence: true},
		{Kind: OpReadd, Key: key, ID: b},
		{Kind: OpReturn, Key: key, ID: b},
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, key + ":long"} {
		if left := rdb.ZRange(ctx, k, 0, -1).Val(); len(left) != 0 {
			t.Fatalf("%s holds %q after every lease put back was returned", k, left)
		}
	}
	if got := announcements(t, l, ch, "sentinel"); !slices.Equal(got, []string{key}) {
		t.Fatalf("announced %q, want %s once", got, key)
	}
}

// A refused return script in the middle of a batch refuses only its own
// returns: the re-adds and returns of another resource around it, before
// and after it in the batch, are made in their order, and the refusal
// lists the broken key's updates alone: its return, and a removal from
// it (not a return) queued after the script.
func TestRefusedReturnMidBatchLeavesTheOtherResourcesOrder(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	broken, good := brokenAndGood(t, l, rdb)
	a := l.NewLeaseID()
	err := l.Apply(ctx, []Update{
		{Kind: OpReadd, Key: good, ID: a},
		{Kind: OpReturn, Key: good, ID: a},
		{Kind: OpReturn, Key: broken, ID: "e/9"},
		{Kind: OpReadd, Key: good, ID: "e/1"},
		{Kind: OpReturn, Key: good, ID: "e/1"},
		{Kind: OpUnwait, Key: broken, ID: "e/w1:0"},
	})
	var refusal *Refusal
	if !errors.As(err, &refusal) || !slices.Equal(refusal.Updates, []int{2, 5}) {
		t.Fatalf("apply with a broken key mid-batch: %v; want a *Refusal listing [2 5]", err)
	}
	if left := rdb.ZRange(ctx, good, 0, -1).Val(); len(left) != 0 {
		t.Fatalf("%s holds %q after its leases were put back and returned", good, left)
	}
}

// The refusal of a return script is its first: on a key of another type
// out of memory, a fenced return whose mark Redis refuses (the script's
// first write) before a plain one refused WRONGTYPE is told as OOM, not
// as the refusal that came last. A plain return first is told as
// WRONGTYPE (its ZREM, a write, lets the mark after it be written).
func TestReturnScriptReturnsItsFirstRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fenced []bool
		want   string
	}{
		{"plain first", []bool{false, true}, "WRONGTYPE"},
		{"fenced first", []bool{true, false}, "OOM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, l, rdb := ledgerOnRedis(t)
			broken, _ := brokenAndGood(t, l, rdb)
			var ups []Update
			for _, f := range tc.fenced {
				ups = append(ups, Update{Kind: OpReturn, Key: broken, ID: l.NewLeaseID(), Fence: f})
			}
			restore := rs.OutOfMemory(t)
			err := l.Apply(context.Background(), ups)
			restore()
			if !errors.Is(err, ErrRefused) || ReplyKind(err) != tc.want {
				t.Fatalf("apply: %v (kind %q); want a refusal of kind %s", err, ReplyKind(err), tc.want)
			}
		})
	}
}

// Each fenced return of a resource's script writes its own lease's mark:
// a late re-add of any of them, not only the first, is refused.
func TestGroupedFencedReturnsMarkEachLease(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	ids := []string{l.NewLeaseID(), l.NewLeaseID(), l.NewLeaseID()}
	var ups []Update
	for i, id := range ids {
		ups = append(ups, Update{Kind: OpReturn, Key: key, ID: id, Fence: i != 1})
	}
	if err := l.Apply(ctx, ups); err != nil {
		t.Fatal(err)
	}
	var late []Update
	for _, id := range ids {
		late = append(late, Update{Kind: OpReadd, Key: key, ID: id})
	}
	if err := l.Apply(ctx, late); err != nil {
		t.Fatal(err)
	}
	if left := rdb.ZRange(ctx, key, 0, -1).Val(); !slices.Equal(left, ids[1:2]) {
		t.Fatalf("late re-adds put back %q, want only the unfenced %s", left, ids[1])
	}
}
