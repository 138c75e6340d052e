package dispatch

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// The status view (Dispatcher.Cluster, behind the admin endpoint) is one
// call of the ledger, one round trip under one deadline: on a Redis that
// takes 550 ms to answer each round trip, with a 1 s timeout, it answers
// after one round trip with what three edges wrote, the leases each
// holds by provider and their waiting requests summed by model. Before,
// it made Held (TIME, then the counts) and Pending (the edges, then their
// figures) under a deadline each: four round trips, and Held's two of
// 550 ms ran past its deadline, so the view said Redis did not answer.
// On a Redis that does not answer at all it says so. The count of round
// trips and the view's reachability tell the outcomes; the time (five
// timeouts at most) only catches a call that hung. The pause leaves the
// one round trip 450 ms for the pause's own round trip and the scheduler
// (with 700 ms, 300 ms, which a -race run at load 30 can use up).
func TestTheClusterStatusIsOneRoundTrip(t *testing.T) {
	const timeout, pause = time.Second, 550 * time.Millisecond
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 4}, {name: "q", cap: 4}}}},
		[]tModel{{name: "m", timeout: 30, cands: []string{"n/p", "n/q"}}})
	f, rdb, l := liveClusterEdge(t, cfg, rs, rs.Addr, timeout)
	ctx := context.Background()
	mine := l.ProviderID
	other := map[string]string{"p": "q", "q": "p"}[mine]
	// Two more edges: e2 holds two leases of each provider, e3 one of
	// the other provider; they publish their waiting requests.
	want := map[string]int{"n/" + mine: 3, "n/" + other: 3}
	for edge, takes := range map[string]map[string]int{"e2": {"p": 2, "q": 2}, "e3": {other: 1}} {
		e := cluster.Open(cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 5 * time.Second, EdgeID: edge})
		defer e.Close()
		for prov, n := range takes {
			for range n {
				if out, err := e.Take(ctx, cluster.Key("n", prov), 4, 4, false, e.NewLeaseID(), "", "", 0, 0); out != cluster.Taken || err != nil {
					t.Fatalf("%s take on %s: %v %v", edge, prov, out, err)
				}
			}
		}
		if err := e.SetPending(ctx, map[string]int{"m": len(edge), "x": 4}); err != nil {
			t.Fatal(err)
		}
	}
	wantPending := map[string]int{"m": 4, "x": 8}
	// Unpaused, it loads the script and warms the pool.
	if st := f.d.Cluster(ctx); st == nil || !st.Reachable {
		t.Fatalf("unpaused status: %+v", st)
	}
	held := pausedCalls(t, f, rdb)
	status := func(ms int64) (st *ClusterStatus, took time.Duration, trips int64) {
		took, trips = held(ms, func() { st = f.d.Cluster(ctx) })
		return st, took, trips
	}
	st, took, trips := status(pause.Milliseconds())
	t.Logf("status: %v, %d round trips", took, trips)
	if st == nil || !st.Reachable || trips != 1 || took >= 5*timeout {
		t.Fatalf("status, each round trip held %v: %+v after %v and %d round trips; want it reachable after one, within %v", pause, st, took, trips, 5*timeout)
	}
	if !maps.Equal(st.InFlight, want) || !maps.Equal(st.Pending, wantPending) {
		t.Fatalf("status: in flight %v, pending %v; want %v, %v", st.InFlight, st.Pending, want, wantPending)
	}
	st, took, _ = status((3 * timeout).Milliseconds())
	// A call that waited the pause out would have its answer: reachable.
	if st == nil || st.Reachable || st.InFlight != nil || st.Pending != nil || took >= 5*timeout {
		t.Fatalf("status on a Redis held %v: %+v after %v; want unreachable within %v", 3*timeout, st, took, 5*timeout)
	}
}

// liveClusterEdge is a fixture of cfg (node n up) whose ledger (edge e1,
// TTL a minute, timeout) reaches rs at addr, once the cluster loop's
// first tick has been answered (awaitFirstTick): the loop's last call for
// TTL/3 (20 s), so that hooks and proxies set afterwards see only the
// test's calls. It returns a plain client of rs and a lease of model m
// the edge holds (released at cleanup, before the fixture closes).
func liveClusterEdge(t *testing.T, cfg *config.Edge, rs *testredis.Server, addr string, timeout time.Duration) (*fixture, *redis.Client, *Lease) {
	t.Helper()
	preloadTick(t, rs.Addr)
	f := closedLedgerFixture(t, cfg, cluster.Config{Address: addr, TTL: time.Minute, Timeout: timeout, EdgeID: "e1"}, Options{})
	f.up("n")
	rdb := rs.Client(t)
	awaitFirstTick(t, rdb)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	t.Cleanup(func() { l.Release(ReasonCompleted) })
	return f, rdb, l
}

// preloadTick loads the script of the cluster loop's first tick (edge
// e1, nothing held: the liveness mark and pending.lua) into the Redis at
// addr, so that the tick is one round trip, no NOSCRIPT resend after it
// (see awaitFirstTick). It reports false when nothing answers at addr.
func preloadTick(t *testing.T, addr string) bool {
	t.Helper()
	probe := cluster.Open(cluster.Config{Address: addr, TTL: time.Minute, Timeout: 5 * time.Second, EdgeID: "e1"})
	defer probe.Close()
	return probe.SetPending(context.Background(), nil) == nil
}

// awaitFirstTick waits until edge e1's cluster loop has been answered its
// first tick (one round trip: preloadTick): its liveness mark is in
// Redis, then one more round trip of rdb is answered. Redis writes the
// replies of the commands one pass of its event loop read before it reads
// more, so by then the tick's reply is in the edge's socket: Redis
// stopped or refusing afterwards cannot fail the tick.
func awaitFirstTick(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the edge marked live", func() bool { return rdb.Exists(ctx, "iop:edge:e1").Val() == 1 })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// pausedCalls adds a pauser (through rdb) to f's ledger and returns a
// func that runs call with each round trip of the ledger held ms, and
// reports how long call took and its round trips, once the last pause
// has ended.
func pausedCalls(t *testing.T, f *fixture, rdb *redis.Client) func(ms int64, call func()) (time.Duration, int64) {
	t.Helper()
	p := clustertest.NewPauser(t, rdb)
	f.d.ledger.Client().AddHook(p)
	return func(ms int64, call func()) (time.Duration, int64) {
		p.Trips.Store(0)
		p.MS.Store(ms)
		start := time.Now()
		call()
		took := time.Since(start)
		p.MS.Store(0)
		if err := rdb.Ping(context.Background()).Err(); err != nil { // the last pause has ended
			t.Fatal(err)
		}
		return took, p.Trips.Load()
	}
}
