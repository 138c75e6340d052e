package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// liveLedgers are ledgers of edges a and b (leases of a minute) on rs,
// both announced alive.
func liveLedgers(t *testing.T, addr, prefix string) (a, b *Ledger) {
	t.Helper()
	open := func(edge string) *Ledger {
		l := Open(Config{Address: addr, TTL: time.Minute, Timeout: time.Second, EdgeID: edge, KeyPrefix: prefix})
		t.Cleanup(func() { _ = l.Close() })
		if err := l.Alive(context.Background()); err != nil {
			t.Fatal(err)
		}
		return l
	}
	return open("edge-a"), open("edge-b")
}

// redisNow is Redis's clock in milliseconds, as the scripts read it.
func redisNow(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// A pinned wait set is spelled in its own namespace, per kind, with the
// resource's Key after its lease prefix: never a model's wait set (nor a
// lease key), and apart per kind.
func TestPinWaitKeySpelling39m(t *testing.T) {
	if got, want := PinWaitKey(Key("n", "p"), 1), "iop:pinwait:1:n/p"; got != want {
		t.Fatalf("PinWaitKey = %q, want %q", got, want)
	}
	if PinWaitKey(Key("n", "p"), 0) == PinWaitKey(Key("n", "p"), 1) {
		t.Fatal("the kinds share a pinned wait set")
	}
}

// A take that names only a pinned wait set (no model's) still yields to
// an older waiter of another live edge in it.
func TestTakeForYieldsToPinnedWaiterWithoutModelSet39m(t *testing.T) {
	takeYieldsToPinnedWaiter(t, "", "")
}

// takeYieldsToPinnedWaiter has edge b (ledgers under prefix) register a
// waiter a second old in n/p's pinned set, then requires edge a's take of
// n/p, naming waitKey as its model's set, to yield to it.
func takeYieldsToPinnedWaiter(t *testing.T, prefix, waitKey string) {
	t.Helper()
	rs := testredis.Start(t)
	ctx := context.Background()
	a, b := liveLedgers(t, rs.Addr, prefix)
	key := Key("n", "p")
	pin := PinWaitKey(key, 0)
	if err := b.Apply(ctx, []Update{{Kind: OpWait, Key: pin, ID: b.NewWaiterID(0), Age: time.Second}}); err != nil {
		t.Fatal(err)
	}
	if out, err := a.TakeFor(ctx, key, 4, 4, false, a.NewLeaseID(), waitKey, pin, "", 0, 0); out != Yield || err != nil {
		t.Fatalf("take: %v %v, want Yield", out, err)
	}
}

// A queued waiter's take places it by its own registration (its arrival
// in whichever set holds it, the model's or the pinned one), not by the
// wait its edge reports: registered 1.5 s ago, it goes before another
// edge's waiter of 1 s ago even when its take says it waited for nothing.
func TestTakeReadsWaiterArrivalFromItsSet39m(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		rs := testredis.Start(t)
		ctx := context.Background()
		a, b := liveLedgers(t, rs.Addr, "")
		key, wait := Key("n", "p"), WaitKey("m", 0)
		pin := PinWaitKey(key, 0)
		set := wait
		if pinned {
			set = pin
		}
		mine := a.NewWaiterID(0)
		if err := a.Apply(ctx, []Update{
			{Kind: OpWait, Key: set, ID: mine, Age: 1500 * time.Millisecond},
			{Kind: OpWait, Key: set, ID: b.NewWaiterID(0), Age: time.Second},
		}); err != nil {
			t.Fatal(err)
		}
		if out, err := a.TakeFor(ctx, key, 4, 4, false, a.NewLeaseID(), wait, pin, mine, 0, 0); out != Taken || err != nil {
			t.Fatalf("pinned %v: take of the older waiter: %v %v, want Taken", pinned, out, err)
		}
	}
}

// A take cleans the pinned wait set as it does the model's: a member
// older than ten yields (its edge lost it) and a waiter of an edge that is
// gone are removed, and neither holds the take back.
func TestTakeCleansPinnedWaitSet39m(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	rdb := rs.Client(t)
	a, _ := liveLedgers(t, rs.Addr, "")
	key := Key("n", "p")
	pin := PinWaitKey(key, 0)
	now := redisNow(t, rdb)
	stale, gone := "edge-b/w1:0", "edge-gone/w1:0"
	if err := rdb.ZAdd(ctx, pin,
		redis.Z{Score: float64(now - 11*MaxYield.Milliseconds()), Member: stale},
		redis.Z{Score: float64(now - 1000), Member: gone}).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := a.TakeFor(ctx, key, 4, 4, false, a.NewLeaseID(), WaitKey("m", 0), pin, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v, want Taken", out, err)
	}
	left, err := rdb.ZRange(ctx, pin, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the pinned wait set still holds %q", left)
	}
}

// A pinned wait set of another type is the take's ErrWrongType, as its
// other keys are, and nothing is taken.
func TestTakeForPinnedSetOfAnotherType39m(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	rdb := rs.Client(t)
	a, _ := liveLedgers(t, rs.Addr, "")
	key := Key("n", "p")
	pin := PinWaitKey(key, 0)
	if err := rdb.Set(ctx, pin, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.TakeFor(ctx, key, 4, 4, false, a.NewLeaseID(), WaitKey("m", 0), pin, "", 0, 0); !errors.Is(err, ErrWrongType) {
		t.Fatalf("take: %v, want %v", err, ErrWrongType)
	}
	if n, err := rdb.ZCard(ctx, key).Result(); n != 0 || err != nil {
		t.Fatalf("%d leases held (%v)", n, err)
	}
}

// Under a prefix of its own, a take reads the pinned wait set where the
// ledger's Apply put it (the deployment's prefix), not the default's.
func TestTakeForPinnedSetUnderPrefix39m(t *testing.T) {
	takeYieldsToPinnedWaiter(t, "blue", WaitKey("m", 0))
}
