package dispatch

// Mutants of the thirty-eighth pass's dispatch changes that the tests
// cannot tell apart, and why:
//   - New's "graceBase <= 0" made "< 0": cancelGraceFrom takes a base
//     that is not positive as the default again, so a zero base still
//     yields 5 s.
//   - syncSpecsLocked's first setSpec (the desired spec) given a zero base:
//     every grant is on a provider the node's running config names, whose
//     setSpec (with the dispatcher's base) overwrites it first; a zero base
//     is the default anyway.
//   - waitAfterYieldLocked returning the pin whenever there is one (not
//     only when it is c): when pinForLocked names a provider, pickLocked
//     picks only it (or nothing), so c is that provider; they differ only
//     if the remembered response or the provider's state changed during
//     the take's round trip.
//   - unpinLocked's unwait without its "member != \"\"" guard: with a
//     ledger every queued waiter has a member (waitLocked sets it before
//     the op is queued), so the guard never fails.

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A pinned waiter's hand-on (its provider's return announced) yields to an
// older waiter of another live edge pinned to the same provider: the take
// reads the provider's pinned wait set, so the freed slot of a is not
// taken by the younger follow-up of e2 while e3's older one waits for it.
func TestClusterPinnedHandOnYieldsToOlderPinnedWaiter39m(t *testing.T) {
	e1, e2, _, la, rdb := pinClusterPair(t, time.Minute)
	if lb := mustAcquire(t, e1.d, Request{Model: "m"}); lb.NodeID != "b" { // b full
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	handOnYields(t, e2, la, rdb, followUp)
}

// longAnsweredOnA is two edges of longPinEdge on a fresh Redis at addr
// (rdb, a client of it): e1 holds la, a long lease on a that answered
// resp_a (in Redis), and a second long lease, on b, which fills it.
func longAnsweredOnA(t *testing.T) (rdb *redis.Client, addr string, e2 *fixture, la *Lease) {
	t.Helper()
	rs := testredis.Start(t)
	rdb = rs.Client(t)
	e1 := longPinEdge(t, rs.Addr, "e1")
	e2 = longPinEdge(t, rs.Addr, "e2")
	longReq := Request{Model: "m", PromptTokens: 20}
	la = mustAcquire(t, e1.d, longReq)
	if la.NodeID != "a" {
		t.Fatalf("first lease on %s, want a", la.NodeID)
	}
	e1.d.RememberResponse("resp_a", la)
	waitRedisKey(t, rdb, "iop:resp:resp_a")
	if lb := mustAcquire(t, e1.d, longReq); lb.NodeID != "b" { // b full
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	return rdb, rs.Addr, e2, la
}

// The same for a long follow-up: its hand-on reads a's pinned set of long
// requests, where the other edge's older long follow-up waits.
func TestClusterLongPinnedHandOnYields39m(t *testing.T) {
	rdb, _, e2, la := longAnsweredOnA(t)
	handOnYields(t, e2, la, rdb, Request{Model: "m", PromptTokens: 20, PreviousResponseID: "resp_a"})
}

// handOnYields: with a (held by e1's la) and b full, e2's follow-up fu
// pinned to a, younger than e3's (a ledger of another live edge) pinned
// to a in the same kind, does not get a when e1 returns it: e2's hand-on
// yields.
func handOnYields(t *testing.T, e2 *fixture, la *Lease, rdb *redis.Client, fu Request) {
	t.Helper()
	ctx := context.Background()
	// e3 is another live edge with a follow-up pinned to a: a ledger of
	// its own (no dispatcher, so it never takes the slot itself).
	e3 := cluster.Open(cluster.Config{Address: rdb.Options().Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e3"})
	t.Cleanup(func() { _ = e3.Close() })
	if err := e3.Alive(ctx); err != nil {
		t.Fatal(err)
	}
	pin := cluster.PinWaitKey(cluster.Key("a", "p"), queueOf(fu.PromptTokens > 0, false))
	older := e3.NewWaiterID(0)
	if err := e3.Apply(ctx, []cluster.Update{{Kind: cluster.OpWait, Key: pin, ID: older}}); err != nil {
		t.Fatal(err)
	}
	got := e2.enqueue(ctx, fu)
	waitFor(t, "e2's follow-up registered in a's pinned set", func() bool { return rdb.ZCard(ctx, pin).Val() == 2 })
	// e3's waiter 600 ms old, e2's 300 ms: e3's is ahead by more than
	// cluster.FairSlack, and both within cluster.MaxYield.
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	members, err := rdb.ZRange(ctx, pin, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		age := 300 * time.Millisecond
		if m == older {
			age = 600 * time.Millisecond
		}
		if err := rdb.ZAddXX(ctx, pin, redis.Z{Score: float64(now.Add(-age).UnixMilli()), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e2.d.mu.Lock()
	r := e2.d.resources[resKey{"a", "p"}]
	wakes := r.wakes
	e2.d.mu.Unlock()
	la.Release(ReasonCompleted)
	// The announcement wakes a on e2, whose hand-on to the follow-up
	// yields: a is marked full again, nothing reserved.
	waitFor(t, "e2's hand-on of a yielded", func() bool {
		e2.d.mu.Lock()
		defer e2.d.mu.Unlock()
		return r.wakes != wakes && r.remoteFull && r.inFlight == 0
	})
	select {
	case res := <-got:
		t.Fatalf("e2's younger follow-up was served: %+v", res)
	default:
	}
	if n := rdb.ZCard(ctx, cluster.Key("a", "p")).Val(); n != 0 {
		t.Fatalf("a's ledger entry holds %d leases, want none", n)
	}
}

// longPinEdge is an edge (id) on the ledger at addr whose model m takes
// requests of 10 prompt tokens or more as long, on a/p and b/p (one slot
// each, long ones too); both nodes ready.
func longPinEdge(t *testing.T, addr, id string) *fixture {
	t.Helper()
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1, long: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1, long: 1}}}},
		[]tModel{{name: "m", long: 10, timeout: 60, cands: []string{"a/p", "b/p"}}})
	f := closedLedgerFixture(t, cfg, cluster.Config{Address: addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: id}, Options{})
	f.up("a")
	f.up("b")
	return f
}

// A long follow-up pinned in cluster mode waits in its provider's pinned
// set of long requests (not the short ones'), and a fresh long request of
// another edge, whose take reads that same set, yields a's slot to it.
func TestClusterLongFollowUpWaitsInItsKindsSet39m(t *testing.T) {
	ctx := context.Background()
	rdb, addr, e2, la := longAnsweredOnA(t)
	fu := e2.enqueue(ctx, Request{Model: "m", PromptTokens: 20, PreviousResponseID: "resp_a"})
	key := cluster.Key("a", "p")
	longPin := cluster.PinWaitKey(key, queueOf(true, false))
	waitFor(t, "the long follow-up registered in a's pinned set of long requests", func() bool { return rdb.ZCard(ctx, longPin).Val() == 1 })
	if n := rdb.ZCard(ctx, cluster.PinWaitKey(key, queueOf(false, false))).Val(); n != 0 {
		t.Fatalf("a's pinned set of short requests holds %d members", n)
	}
	ageWaiterSet(t, rdb, longPin, 300*time.Millisecond)
	// a's slot freed in Redis only (both its sets: the lease is long).
	if err := rdb.ZRem(ctx, key, la.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZRem(ctx, key+":long", la.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	e3 := longPinEdge(t, addr, "e3")
	if l, err := e3.d.Acquire(ctx, Request{Model: "m", PromptTokens: 20, NoWait: true}); err == nil {
		t.Fatalf("e3's fresh long request took %s/p ahead of the older pinned follow-up", l.NodeID)
	}
	if l := recvLease(t, fu); l.NodeID != "a" {
		t.Fatalf("the follow-up got %s, want a", l.NodeID)
	}
}

// A new waiter registers at its arrival (no age): another edge's fresh
// take yields to it once it is ahead, here by its priority (a shift of
// PriorityStep), with no aging of its score in Redis. Registered as
// already old, it would fall out of the window takes look at
// (cluster.MaxYield) and lose its claim across edges.
func TestClusterNewWaiterRegistersAtItsArrival39m(t *testing.T) {
	ctx := context.Background()
	e1, e2, _, la, rdb := pinClusterPair(t, time.Minute)
	if lb := mustAcquire(t, e1.d, Request{Model: "m"}); lb.NodeID != "b" { // b full
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e1.enqueue(cctx, Request{Model: "m", Priority: 1})
	waitFor(t, "e1's waiter registered", func() bool { return waitSetSize(t, rdb) == 1 })
	// a's slot freed in Redis only: e1 does not hear of it.
	if err := rdb.ZRem(ctx, cluster.Key("a", "p"), la.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	if l, err := e2.d.Acquire(ctx, Request{Model: "m", NoWait: true}); err == nil {
		t.Fatalf("e2's fresh request took %s/p ahead of e1's prioritised waiter", l.NodeID)
	}
}
