package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// fastRenewCluster is a cluster fixture whose leases are renewed every
// second (a TTL of 3 s). A write pause may catch the cluster loop in
// another call than the renewal (marking the edge live, publishing its
// pending figures): that call gives up within the 2 s timeout, and the
// renewal follows. Node n (ready) has provider p of capacity 2; model m
// queues up to 30 s.
func fastRenewCluster(t *testing.T, rs *testredis.Server) *fixture {
	t.Helper()
	f := newClusterFixture(t, oneProviderCfg(t, 2), rs)
	f.up("n")
	return f
}

// inLedger reports whether rdb's ledger entry key holds lease id.
func inLedger(t *testing.T, rdb *redis.Client, key, id string) bool {
	t.Helper()
	_, err := rdb.ZScore(context.Background(), key, id).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return err == nil
}

// A lease the ledger lost while the edge still holds it (Redis restarted
// without persistence: every lease is gone, as when renewals failed for
// longer than the TTL) is put back once Redis answers again: until the
// lease ends, the other edges count it and do not grant its slot twice.
// The old code only extended leases still in the ledger: the other edges
// saw the provider free for as long as the request ran.
func TestClusterLeaseLostFromRedisIsPutBack(t *testing.T) {
	f, rs := oneSlotCluster(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs.Restart()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	key := cluster.Key("n", "p")
	waitFor(t, "the held lease back in the ledger", func() bool { return inLedger(t, rdb, key, l.ledgerID) })
	other := cluster.Open(cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "other"})
	defer other.Close()
	ctx := context.Background()
	if out, err := other.Take(ctx, key, 1, 1, false, other.NewLeaseID(), "", "", 0, 0); out != cluster.Full || err != nil {
		t.Fatalf("another edge's take of the slot in use: %v %v, want Full", out, err)
	}
	l.Release(ReasonCompleted)
	waitFor(t, "the lease returned", func() bool { return !inLedger(t, rdb, key, l.ledgerID) })
}

// A lease returned while the renewal that finds it missing is on its way
// is not put back: the check and the re-add are ordered with the returns.
// Here the ledger lost both leases (a flush), the renewal is held in Redis
// by a write pause, and one lease is released meanwhile; once Redis
// writes again, the one still held is back and the returned one is not
// (put back, it would hold its slot in every edge's count for a TTL).
func TestClusterLeaseReturnedDuringRenewalIsNotPutBack(t *testing.T) {
	rs := testredis.Start(t)
	f := fastRenewCluster(t, rs)
	held := mustAcquire(t, f.d, Request{Model: "m"})
	defer held.Release(ReasonCompleted)
	gone := mustAcquire(t, f.d, Request{Model: "m"})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	// Flushed and paused back to back (one pipeline), so that no renewal
	// puts the leases back in between.
	pause := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer pause.Close()
	pipe := pause.Pipeline()
	pipe.FlushDB(ctx)
	pipe.Do(ctx, "CLIENT", "PAUSE", int(waitDeadline/time.Millisecond), "WRITE")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	defer unpause(t, pause) // a failed test leaves no Redis paused behind it
	waitFor(t, "the renewal waiting in Redis", func() bool {
		list, err := pause.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, "flags=b") && strings.Contains(line, "cmd=evalsha ") {
				return true
			}
		}
		return false
	})
	gone.Release(ReasonCompleted)
	unpause(t, pause)
	key := cluster.Key("n", "p")
	waitFor(t, "the held lease back in the ledger", func() bool { return inLedger(t, rdb, key, held.ledgerID) })
	if inLedger(t, rdb, key, gone.ledgerID) {
		t.Fatalf("the lease returned during the renewal was put back")
	}
}
