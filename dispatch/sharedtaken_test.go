package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/config"
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
	f := patientClusterFixture(t, cfg, rs)
	f.up("n")
	r := f.res("n", "p")

	rdb := pauseWrites(t, rs) // the take stays in flight
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
	unpause(t, rdb)
	res := recv(t, ch)
	if res.err != nil {
		t.Fatalf("the slot the ledger granted: %v", res.err)
	}
	res.l.Release(ReasonCompleted)
}

// patientClusterFixture is newClusterFixture with a Redis timeout longer
// than the pauses of pauseWrites (and a TTL of a minute).
func patientClusterFixture(t *testing.T, cfg *config.Edge, rs *testredis.Server) *fixture {
	t.Helper()
	return closedLedgerFixture(t, cfg, cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * waitDeadline, EdgeID: "e1"}, Options{})
}

// res is the dispatcher's resource of node's provider.
func (f *fixture) res(node, provider string) *resource {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	return f.d.resources[resKey{node, provider}]
}

// pauseWrites makes rs hold every write (scripts included) until unpause
// with the client it returns (closed at cleanup), or waitDeadline.
func pauseWrites(t *testing.T, rs *testredis.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", int(waitDeadline/time.Millisecond), "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	return rdb
}

func unpause(t *testing.T, rdb *redis.Client) {
	t.Helper()
	if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
}
