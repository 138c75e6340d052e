package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A slot the ledger answered Taken for is the request's, even when another
// grant's Full, answered during the same round trip, has marked the
// provider full meanwhile: the ledger counted this lease before that Full.
// Giving the slot back left a NoWait request (a failover) with
// no_provider, and a fresh one queued behind its own return, while the
// cluster had just granted it.
func TestClusterTakenSlotKeptWhenAConcurrentFullMarkedTheProvider(t *testing.T) {
	onlyAnnouncementsWake(t)
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 2}}}},
		[]tModel{{name: "m", cands: []string{"n/p"}}})
	// A Redis timeout longer than the pause below.
	led := cluster.Open(cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * waitDeadline, EdgeID: "e1"})
	f := &fixture{t: t, reg: prometheus.NewRegistry(), bus: &recBus{}}
	f.d = New(cfg, Options{Bus: f.bus, Metrics: NewMetrics(f.reg), Ledger: led, LedgerTTL: time.Minute})
	t.Cleanup(func() {
		f.d.Close()
		f.wg.Wait()
		_ = led.Close()
	})
	f.up("n")
	f.d.mu.Lock()
	r := f.d.resources[resKey{"n", "p"}]
	f.d.mu.Unlock()

	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	// Writes (scripts included) wait until the UNPAUSE below: the take
	// stays in flight.
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", int(waitDeadline/time.Millisecond), "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	ch := f.acquireAsync(context.Background(), Request{Model: "m", NoWait: true})
	waitFor(t, "the take in flight", func() bool {
		f.d.mu.Lock()
		defer f.d.mu.Unlock()
		return r.inFlight == 1 && len(r.leases) == 0 // reserved, not granted
	})
	// Another grant's Full, answered first.
	f.d.mu.Lock()
	r.remoteFull, r.remoteFullUntil = true, time.Now().Add(time.Hour)
	f.d.mu.Unlock()
	if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	res := recv(t, ch)
	if res.err != nil {
		t.Fatalf("the slot the ledger granted: %v", res.err)
	}
	res.l.Release(ReasonCompleted)
}
