package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A lease released after Close, whose re-add went unanswered in the
// returner's last batches and reaches Redis only after the return, is not
// put back: the return, sent after the returner ended (sendLate), is
// fenced as the returner's own are. The old code sent it plain, and the
// late re-add took the slot again, held by nobody, for the lease TTL (a
// minute here).
func TestClusterLateReturnAfterCloseFencesUnsureReadd(t *testing.T) {
	rs := testredis.Start(t)
	p := newReaddHolder(t, rs.Addr)
	f, led := ledgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: p.addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"}, Options{})
	t.Cleanup(func() { _ = led.Close() })
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	key := cluster.Key("n", "p")
	ctx := context.Background()
	rdb := rs.Client(t)
	p.loseAndReadd(t, f, rdb, key, l)
	// Close waits for the returner, whose batch with the re-add times
	// out meanwhile: the lease's return comes after its last batch.
	f.d.Close()
	l.Release(ReasonCompleted)
	p.returnThenReadd(t, rdb, l.ledgerID)
	if inLedger(t, rdb, key, l.ledgerID) {
		t.Fatalf("the lease released after Close is back in the ledger after its late re-add (ledger: %v)", rdb.ZRangeWithScores(ctx, key, 0, -1).Val())
	}
}
