package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A lease released just before Close reaches the ledger: Close sends the
// returns still queued instead of dropping them, which left the slot taken
// in Redis for the lease TTL (a minute here) for every edge. Each round is
// a release racing Close; on the old code about half of them lost the
// return.
func TestClusterReturnQueuedAtCloseIsSent(t *testing.T) {
	rs := testredis.Start(t)
	cfg := oneProviderCfg(t, 1)
	probe := cluster.Open(cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "probe"})
	defer probe.Close()
	key := cluster.Key("n", "p")
	for round := range 12 {
		f, led := ledgerFixture(t, cfg, cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
		f.up("n")
		l := mustAcquire(t, f.d, Request{Model: "m"})
		l.Release(ReasonCompleted)
		f.d.Close()
		_ = led.Close()
		held, err := probe.Held(context.Background(), []string{key})
		if err != nil {
			t.Fatal(err)
		}
		if held[key] != 0 {
			t.Fatalf("round %d: the ledger still holds %d lease(s) on %s after a release and Close", round, held[key], key)
		}
	}
}
