package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
	"github.com/iop-gateway/iop/nodewire"
)

// pinClusterPair is two edges (e1, e2) of pinPairCfg (a/p and b/p, one
// slot each) sharing a ledger on one Redis, both nodes ready on each, and
// a lease of e1 on a/p whose response "resp_a" e1 remembers and has
// shared; e2 learns it from Redis. Leases live ttl (renewed every ttl/3).
func pinClusterPair(t *testing.T, ttl time.Duration) (e1, e2 *fixture, ca2 *nodewire.Conn, la *Lease, rdb *redis.Client) {
	t.Helper()
	rs := testredis.Start(t)
	rdb = rs.Client(t)
	e1, _ = pinEdge(t, rs.Addr, "e1", ttl)
	e2, ca2 = pinEdge(t, rs.Addr, "e2", ttl)
	la = mustAcquire(t, e1.d, Request{Model: "m"})
	if la.NodeID != "a" {
		t.Fatalf("first lease on %s, want a", la.NodeID)
	}
	e1.d.RememberResponse("resp_a", la)
	waitRedisKey(t, rdb, "iop:resp:resp_a")
	return e1, e2, ca2, la, rdb
}

// pinEdge is an edge (id) of pinPairCfg on the ledger at addr, both nodes
// ready; it returns a's connection too.
func pinEdge(t *testing.T, addr, id string, ttl time.Duration) (*fixture, *nodewire.Conn) {
	t.Helper()
	f := closedLedgerFixture(t, pinPairCfg(t, 60, 0), cluster.Config{Address: addr, TTL: ttl, Timeout: 2 * time.Second, EdgeID: id}, Options{})
	ca := f.up("a")
	f.up("b")
	return f, ca
}

// waitSetSize is how many waiters of model m (kind 0: short, no tunnel)
// the cluster's wait set holds.
func waitSetSize(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), cluster.WaitKey("m", queueOf(false, false))).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ageWaiters moves the arrival of every member of m's wait set back by d.
func ageWaiters(t *testing.T, rdb *redis.Client, d time.Duration) {
	t.Helper()
	ageWaiterSet(t, rdb, cluster.WaitKey("m", queueOf(false, false)), d)
}

// ageWaiterSet moves the arrival of every member of the wait set key to d
// before Redis's now.
func ageWaiterSet(t *testing.T, rdb *redis.Client, key string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	members, err := rdb.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if err := rdb.ZAddXX(ctx, key, redis.Z{Score: float64(now.Add(-d).UnixMilli()), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// pinSetSize is how many waiters pinned to node's provider p (kind 0) the
// cluster's pinned wait set of it holds.
func pinSetSize(t *testing.T, rdb *redis.Client, node string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), cluster.PinWaitKey(cluster.Key(node, "p"), queueOf(false, false))).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// In cluster mode a follow-up whose provider another edge fills waits for
// it although b is free, and is served by it once that edge returns its
// slot. Before, cluster mode pinned nobody: the follow-up went to b (which
// answers vLLM's 404). The pinned waiter is in a's pinned wait set, not in
// the model's, so another edge's take on b does not yield to it (NoWait: a
// yield would refuse the request).
func TestClusterFollowUpWaitsForItsProvider38(t *testing.T) {
	e1, e2, _, la, rdb := pinClusterPair(t, 3*time.Second)
	fu := e2.enqueue(context.Background(), followUp)
	if q := provOf(e2.d.Status(), "a", "p").Queued; q != 1 {
		t.Fatalf("e2's follow-up queued against a: %d, want 1", q)
	}
	if n := waitSetSize(t, rdb); n != 0 {
		t.Fatalf("the pinned waiter is in the model's wait set (%d members)", n)
	}
	waitFor(t, "the pinned waiter registered in a's pinned set", func() bool { return pinSetSize(t, rdb, "a") == 1 })
	lb := mustAcquire(t, e1.d, Request{Model: "m", NoWait: true})
	if lb.NodeID != "b" {
		t.Fatalf("e1's request went to %s, want b", lb.NodeID)
	}
	select {
	case r := <-fu:
		t.Fatalf("the follow-up was answered while a was full: %+v", r)
	default:
	}
	la.Release(ReasonCompleted) // e1's return is announced; e2 takes a's slot
	if l := recvLease(t, fu); l.NodeID != "a" {
		t.Fatalf("the follow-up got %s, want a", l.NodeID)
	}
	lb.Release(ReasonCompleted)
	waitFor(t, "the served waiter left a's pinned set", func() bool { return pinSetSize(t, rdb, "a") == 0 })
}

// A slot of a goes to the oldest waiter that can use it across edges,
// pinned or not: a third edge's fresh request, which could take a's slot
// freed behind everyone's back, yields it to e2's older follow-up pinned
// to a (NoWait: refused, as b is full), which then gets it. Without the
// pinned set in the take, the fresh request took it.
func TestClusterTakeYieldsToOlderPinnedWaiter38(t *testing.T) {
	e1, e2, _, la, rdb := pinClusterPair(t, time.Minute)
	lb := mustAcquire(t, e1.d, Request{Model: "m"}) // b full
	if lb.NodeID != "b" {
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	fu := e2.enqueue(context.Background(), followUp)
	waitFor(t, "the pinned waiter registered", func() bool { return pinSetSize(t, rdb, "a") == 1 })
	ageWaiterSet(t, rdb, cluster.PinWaitKey(cluster.Key("a", "p"), queueOf(false, false)), 300*time.Millisecond)
	// a's slot freed in Redis only: e1 still counts its lease, e2 saw a
	// full and retries it within retryRemoteFull.
	if err := rdb.ZRem(context.Background(), cluster.Key("a", "p"), la.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	e3, _ := pinEdge(t, rdb.Options().Addr, "e3", time.Minute)
	if l, err := e3.d.Acquire(context.Background(), Request{Model: "m", NoWait: true}); err == nil {
		t.Fatalf("e3's fresh request took %s/p ahead of the older pinned follow-up", l.NodeID)
	}
	if l := recvLease(t, fu); l.NodeID != "a" {
		t.Fatalf("the follow-up got %s, want a", l.NodeID)
	}
}

// A pinned waiter whose provider stops serving (its node lost on this
// edge) is made ordinary and registers in the shared wait set as any
// waiter does, and the next candidate to free serves it.
func TestClusterUnpinnedWaiterRegisters38(t *testing.T) {
	e1, e2, ca2, _, rdb := pinClusterPair(t, 3*time.Second)
	lb := mustAcquire(t, e1.d, Request{Model: "m"}) // b full too
	if lb.NodeID != "b" {
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	fu := e2.enqueue(context.Background(), followUp)
	if n := waitSetSize(t, rdb); n != 0 {
		t.Fatalf("the pinned waiter is in the shared wait set (%d members)", n)
	}
	waitFor(t, "the pinned waiter registered", func() bool { return pinSetSize(t, rdb, "a") == 1 })
	arrived, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // an age to keep (setup, not a measure)
	e2.d.Closed(ca2, errors.New("lost"))
	waitFor(t, "the unpinned waiter moved to the model's set", func() bool { return waitSetSize(t, rdb) == 1 && pinSetSize(t, rdb, "a") == 0 })
	zs, err := rdb.ZRangeWithScores(context.Background(), cluster.WaitKey("m", queueOf(false, false)), 0, -1).Result()
	if err != nil || len(zs) != 1 {
		t.Fatalf("model's wait set: %v %v", zs, err)
	}
	if at := time.UnixMilli(int64(zs[0].Score)); at.After(arrived.Add(100 * time.Millisecond)) {
		t.Errorf("the unpinned waiter registered as arriving at %v, %v after it arrived: it lost its place", at, at.Sub(arrived))
	}
	lb.Release(ReasonCompleted)
	if l := recvLease(t, fu); l.NodeID != "b" {
		t.Fatalf("the unpinned follow-up got %s, want b", l.NodeID)
	}
	waitFor(t, "the served waiter left the wait set", func() bool { return waitSetSize(t, rdb) == 0 })
}

// A follow-up whose take on its provider, free in the ledger, yields to
// an older waiter of another edge queues pinned to that provider, not for
// any candidate: it counts against a's queue only. (a is freed in Redis
// behind e1's back, so that e1's own waiter, queued while a and b were
// full, does not take it first; leases live a minute, so e1 does not
// renew a's back meanwhile.)
func TestClusterFollowUpYieldingStaysPinned38(t *testing.T) {
	e1, e2, _, la, rdb := pinClusterPair(t, time.Minute)
	lb := mustAcquire(t, e1.d, Request{Model: "m"}) // b full
	if lb.NodeID != "b" {
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e1.enqueue(ctx, Request{Model: "m"})
	waitFor(t, "e1's waiter registered", func() bool { return waitSetSize(t, rdb) == 1 })
	if err := rdb.ZRem(context.Background(), cluster.Key("a", "p"), la.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	// e1's waiter is owed the slot only once it is ahead by more than
	// cluster.FairSlack (and for cluster.MaxYield after its arrival):
	// its arrival is moved 300 ms back rather than waited out.
	ageWaiters(t, rdb, 300*time.Millisecond)
	e2.enqueue(ctx, followUp)
	st := e2.d.Status()
	if qa, qb := provOf(st, "a", "p").Queued, provOf(st, "b", "p").Queued; qa != 1 || qb != 0 {
		t.Fatalf("e2's follow-up after its take yielded: queued against a %d, b %d; want 1, 0 (pinned to a)", qa, qb)
	}
	if n := waitSetSize(t, rdb); n != 1 {
		t.Fatalf("the shared wait set holds %d members, want e1's waiter only", n)
	}
	if n := rdb.ZCard(context.Background(), cluster.Key("a", "p")).Val(); n != 0 {
		t.Fatalf("a's ledger entry holds %d leases, want none (the take yielded; nothing renewed a's back)", n)
	}
}
