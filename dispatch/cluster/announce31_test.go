package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// announcements reads ch until the message sentinel, which the test
// publishes after the batches it checks (pub/sub keeps one publisher's
// order), and returns the payloads before it.
func announcements(t *testing.T, l *Ledger, ch <-chan *redis.Message, sentinel string) []string {
	t.Helper()
	if err := l.Client().Publish(context.Background(), l.FreedChannel(), sentinel).Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if m.Payload == sentinel {
				return got
			}
			got = append(got, m.Payload)
		case <-deadline:
			t.Fatalf("the sentinel never came (announcements so far: %q)", got)
		}
	}
}

// A return of a lease Redis does not hold (the return queued for a take
// Redis refused, or one sent again) removes nothing and announces
// nothing: the old code published every returned key, and each refused
// take woke every edge. A batch holding such a return and one that does
// remove a lease of the same resource announces it once.
func TestReturnAnnouncedOnlyWhenItRemovedALease(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	ch := subscribed(t, rdb, l.FreedChannel())
	a, b := Key("n", "a"), Key("n", "b")
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: a, ID: "e/never"}, {Kind: OpReturn, Key: b, ID: "e/never2", Fence: true}}); err != nil {
		t.Fatal(err)
	}
	if got := announcements(t, l, ch, "sentinel-1"); len(got) != 0 {
		t.Fatalf("returns of leases not held announced %q, want nothing", got)
	}
	held := l.NewLeaseID()
	if out, err := l.Take(ctx, a, 2, 2, true, held, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	if err := l.Apply(ctx, []Update{
		{Kind: OpReturn, Key: a, ID: "e/never"},
		{Kind: OpReturn, Key: b, ID: "e/never2"},
		{Kind: OpReturn, Key: a, ID: held, Fence: true},
	}); err != nil {
		t.Fatal(err)
	}
	if got := announcements(t, l, ch, "sentinel-2"); !slices.Equal(got, []string{a}) {
		t.Fatalf("announced %q, want %s once", got, a)
	}
	if n := rdb.ZCard(ctx, a).Val() + rdb.ZCard(ctx, a+":long").Val(); n != 0 {
		t.Fatalf("%d leases left after the return", n)
	}
}

// brokenAndGood is two resources of l: broken, whose key holds another
// program's value (every update of it is refused), and good, where l
// holds lease e/1.
func brokenAndGood(t *testing.T, l *Ledger, rdb *redis.Client) (broken, good string) {
	t.Helper()
	ctx := context.Background()
	broken, good = Key("n", "broken"), Key("n", "good")
	if err := rdb.Set(ctx, broken, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Take(ctx, good, 2, 2, false, "e/1", "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	return broken, good
}

// A refused batch tells which updates Redis refused: every return of a
// resource whose key holds another type, not the updates around them
// that Redis applied.
func TestApplyRefusalListsTheRefusedUpdates(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	broken, good := brokenAndGood(t, l, rdb)
	wait := WaitKey("m", 0)
	err := l.Apply(ctx, []Update{
		{Kind: OpWait, Key: wait, ID: "e/w1:0"},
		{Kind: OpReturn, Key: broken, ID: "e/0"},
		{Kind: OpReturn, Key: good, ID: "e/1"},
		{Kind: OpReturn, Key: broken, ID: "e/2", Fence: true},
		{Kind: OpUnwait, Key: wait, ID: "e/w1:0"},
	})
	var refusal *Refusal
	if !errors.As(err, &refusal) || !errors.Is(err, ErrRefused) || ReplyKind(err) != "WRONGTYPE" {
		t.Fatalf("apply with a key of another type: %v; want a *Refusal of kind WRONGTYPE", err)
	}
	if !slices.Equal(refusal.Updates, []int{1, 3}) {
		t.Fatalf("refused updates %v, want the two returns of the broken key [1 3]", refusal.Updates)
	}
	if n := rdb.ZCard(ctx, good).Val(); n != 0 {
		t.Fatalf("the return Redis accepted in a refused batch was not applied: %d leases left", n)
	}
	if n := rdb.ZCard(ctx, wait).Val(); n != 0 {
		t.Fatalf("the waiter registered and removed around the refusal is still in its set (%d)", n)
	}
}

// The returns of one resource go in one script: a fenced return whose mark
// Redis refuses (out of memory: the script's first write) removes nothing,
// and the plain return after it in the same batch is still made and
// announced. Both are listed as refused (one reply for the script).
func TestGroupedReturnsRefusedMarkSparesTheOthers(t *testing.T) {
	rs, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	fenced, plain := l.NewLeaseID(), l.NewLeaseID()
	for _, id := range []string{fenced, plain} {
		if out, err := l.Take(ctx, key, 2, 2, false, id, "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("take: %v %v", out, err)
		}
	}
	ch := subscribed(t, rdb, l.FreedChannel())
	restore := rs.OutOfMemory(t)
	err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: fenced, Fence: true}, {Kind: OpReturn, Key: key, ID: plain}})
	restore()
	var refusal *Refusal
	if !errors.As(err, &refusal) || ReplyKind(err) != "OOM" || !slices.Equal(refusal.Updates, []int{0, 1}) {
		t.Fatalf("apply out of memory: %v; want a *Refusal of kind OOM listing [0 1]", err)
	}
	if !inSet(t, rdb, key, fenced) || rdb.Exists(ctx, "iop:returned:"+fenced).Val() != 0 {
		t.Fatal("the fenced return whose mark Redis refused removed its lease, or wrote its mark")
	}
	if inSet(t, rdb, key, plain) {
		t.Fatal("the plain return after a refused mark was not made")
	}
	if got := announcements(t, l, ch, "sentinel"); !slices.Equal(got, []string{key}) {
		t.Fatalf("announced %q, want %s once", got, key)
	}
}

// inSet reports whether rdb's sorted set key holds member id.
func inSet(t *testing.T, rdb *redis.Client, key, id string) bool {
	t.Helper()
	_, err := rdb.ZScore(context.Background(), key, id).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return err == nil
}
