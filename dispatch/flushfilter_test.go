package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// After Close, the updates still queued are sent without the re-adds and
// the waiters' registrations: a lease put back then is no longer renewed
// and its return may already be on its way (sendLate), and a waiter
// registered then has been failed by Close. Returns and waiters' removals
// are sent. The queue here holds what Close left behind, then the return
// of a lease released after Close, whose sendLate flushes it all.
func TestClusterShutdownFlushSendsOnlyReturnsAndRemovals(t *testing.T) {
	rs := testredis.Start(t)
	f, led := ledgerFixture(t, oneProviderCfg(t, 2), cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	key, waitKey := cluster.Key("n", "p"), cluster.WaitKey("m", 0)
	const gone, left, joined = "other/w1:0", "e1/readd-1", "e1/w2:0"
	if err := rdb.ZAdd(ctx, waitKey, redis.Z{Score: 1, Member: gone}).Err(); err != nil {
		t.Fatal(err)
	}
	f.d.Close()
	for _, u := range []cluster.Update{
		{Kind: cluster.OpReadd, Key: key, ID: left},
		{Kind: cluster.OpWait, Key: waitKey, ID: joined},
		{Kind: cluster.OpUnwait, Key: waitKey, ID: gone},
	} {
		f.d.returns <- u
	}
	l.Release(ReasonNodeLost)
	_ = led.Close() // waits for sendLate
	if inLedger(t, rdb, key, l.ledgerID) {
		t.Fatal("the lease released after Close was not returned")
	}
	if inLedger(t, rdb, key, left) {
		t.Fatal("a re-add queued at Close was sent")
	}
	if inLedger(t, rdb, waitKey, joined) {
		t.Fatal("a waiter's registration queued at Close was sent")
	}
	if inLedger(t, rdb, waitKey, gone) {
		t.Fatal("a waiter's removal queued at Close was not sent")
	}
}

// A lease released while Close waits for the returner's batch in flight
// (here a re-add of that very lease, held on its way to Redis until after
// the batch timed out) has its return sent after that batch: the late
// return waits for the dispatcher's goroutines, so the returner, which
// knows the re-add unsure, sends the return fenced, and the re-add that
// reaches Redis afterwards is refused. Sent at once instead, the return
// ran before the re-add, which then took the slot, held by nobody, for
// the TTL (a minute here).
func TestClusterReturnDuringCloseWaitsForReturnerBatch(t *testing.T) {
	rs := testredis.Start(t)
	p := newReaddHolder(t, rs.Addr)
	// The re-add's timeout outlasts the steps between Close's start and
	// the release on a loaded machine.
	f, led := ledgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: p.addr, TTL: time.Minute, Timeout: 3 * time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	key := cluster.Key("n", "p")
	rdb := rs.Client(t)
	p.loseAndReadd(t, f, rdb, key, l)
	closed := make(chan struct{})
	// Owner: the test; Close ends once the returner's batch timed out.
	go func() {
		defer close(closed)
		f.d.Close()
	}()
	waitFor(t, "Close begun", func() bool { return f.d.ctx.Err() != nil })
	l.Release(ReasonNodeLost)
	p.returnThenReadd(t, rdb, l.ledgerID)
	await(t, closed, "Close to return")
	_ = led.Close()
	if inLedger(t, rdb, key, l.ledgerID) {
		t.Fatal("the lease released during Close is back in the ledger after its late re-add")
	}
}
