package dispatch

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// twoProviderCfg is node a with providers p1 and p2 (capacity 4 each),
// model m on both, p1 first (least-loaded picks it while both are idle),
// and model only-p2.
func twoProviderCfg(t tb) *config.Edge {
	t.Helper()
	return buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p1", cap: 4}, {name: "p2", cap: 4}}}},
		[]tModel{{name: "m", cands: []string{"a/p1", "a/p2"}}, {name: "only-p2", cands: []string{"a/p2"}}})
}

// clusterEdge is a dispatcher of twoProviderCfg, node a ready, sharing
// the ledger on rs as edge id, whose calls each take timeout at most.
func clusterEdge(t *testing.T, rs *testredis.Server, id string, timeout time.Duration) *fixture {
	t.Helper()
	f := closedLedgerFixture(t, twoProviderCfg(t), cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: timeout, EdgeID: id}, Options{})
	f.up("a")
	return f
}

// waitRedisKey waits until key exists on rdb.
func waitRedisKey(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	waitFor(t, "Redis has "+key, func() bool { return rdb.Exists(context.Background(), key).Val() == 1 })
}

// A follow-up that reaches another edge than the one that relayed its
// previous response goes to the provider that answered it: the first
// edge shares the id through Redis, the second looks it up there once
// and then knows it. Before, the second edge routed it as usual (p1,
// which answers vLLM's 404).
func TestFollowUpOnAnotherEdgeReachesItsProvider37a(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e1 := clusterEdge(t, rs, "e1", 2*time.Second)
	e2 := clusterEdge(t, rs, "e2", 2*time.Second)

	first := mustAcquire(t, e1.d, Request{Model: "only-p2"})
	e1.d.RememberResponse("resp_1", first)
	first.Release(ReasonCompleted)
	waitRedisKey(t, rdb, "iop:resp:resp_1")
	if v := rdb.Get(context.Background(), "iop:resp:resp_1").Val(); v != cluster.Key("a", "p2") {
		t.Fatalf("Redis holds %q for resp_1, want %q", v, cluster.Key("a", "p2"))
	}
	gets := func() int64 { return clustertest.InfoField(t, rdb, "commandstats", "cmdstat_getrange:", "calls") }
	for i := range 3 {
		l := mustAcquire(t, e2.d, Request{Model: "m", PreviousResponseID: "resp_1"})
		if l.ProviderID != "p2" {
			t.Fatalf("follow-up %d on edge e2 went to %s, want p2 (the provider that answered resp_1)", i, l.ProviderID)
		}
		l.Release(ReasonCompleted)
	}
	if n := gets(); n != 1 {
		t.Errorf("%d Redis lookups for three follow-ups, want 1 (then the edge knows the id)", n)
	}
	// Without a previous response the second edge routes as usual.
	if l := mustAcquire(t, e2.d, Request{Model: "m"}); l.ProviderID != "p1" {
		t.Errorf("a new conversation went to %s, want p1", l.ProviderID)
	}
}

// The first edge whose provider answers an id keeps it across edges (an
// upstream echoing an id it did not answer cannot take the follow-ups);
// this edge's own record stands over Redis's.
func TestFirstAnswererKeepsTheIDAcrossEdges37a(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e1 := clusterEdge(t, rs, "e1", 2*time.Second)
	e2 := clusterEdge(t, rs, "e2", 2*time.Second)
	ctx := context.Background()

	p2 := mustAcquire(t, e1.d, Request{Model: "only-p2"})
	e1.d.RememberResponse("resp_1", p2)
	waitRedisKey(t, rdb, "iop:resp:resp_1")
	p1 := mustAcquire(t, e2.d, Request{Model: "m"})
	if p1.ProviderID != "p1" {
		t.Fatalf("went to %s, want p1", p1.ProviderID)
	}
	e2.d.RememberResponse("resp_1", p1) // the echo: e2 remembers it, Redis keeps p2
	e2.d.RememberResponse("resp_2", p1)
	waitRedisKey(t, rdb, "iop:resp:resp_2")
	if v := rdb.Get(ctx, "iop:resp:resp_1").Val(); v != cluster.Key("a", "p2") {
		t.Errorf("Redis holds %q for resp_1 after another provider echoed it, want p2's key", v)
	}
	if l := mustAcquire(t, e2.d, Request{Model: "m", PreviousResponseID: "resp_1"}); l.ProviderID != "p1" {
		t.Errorf("e2's own record of resp_1 (p1) gave way to Redis's: went to %s", l.ProviderID)
	}
}

// What Redis holds for an id that names no provider of this edge (another
// deployment's resource, a value too long, a key of another type) is
// ignored: the follow-up is routed as usual. A follow-up naming an id
// longer than MaxResponseIDBytes is never looked up.
func TestHostileResponseOwnerIgnored37a(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", 2*time.Second)
	ctx := context.Background()
	rdb.Set(ctx, "iop:resp:resp_unknown", cluster.Key("zz", "p2"), 0)
	rdb.Set(ctx, "iop:resp:resp_long", strings.Repeat(cluster.Key("a", "p2"), 100), 0)
	rdb.Set(ctx, "iop:resp:resp_prefix", "other:lease:a/p2", 0)
	rdb.LPush(ctx, "iop:resp:resp_list", cluster.Key("a", "p2"))
	long := "resp_" + strings.Repeat("x", MaxResponseIDBytes)
	rdb.Set(ctx, "iop:resp:"+long, cluster.Key("a", "p2"), 0)
	gets := func() int64 { return clustertest.InfoField(t, rdb, "commandstats", "cmdstat_getrange:", "calls") }
	for _, id := range []string{"resp_unknown", "resp_long", "resp_prefix", "resp_list", long} {
		before := gets()
		l := mustAcquire(t, e.d, Request{Model: "m", PreviousResponseID: id})
		if l.ProviderID != "p1" {
			t.Errorf("%.20s: went to %s, want p1 (routed as usual)", id, l.ProviderID)
		}
		l.Release(ReasonCompleted)
		want := int64(1)
		if id == long {
			want = 0
		}
		if n := max(gets(), 0) - max(before, 0); n != want {
			t.Errorf("%.20s: %d Redis lookups, want %d", id, n, want)
		}
	}
}

// Sharing never holds a request up: with Redis paused, RememberResponse
// queues up to responseShareQueue ids (and one batch in flight) and drops
// the rest, counted; once Redis answers the writer goes on.
func TestResponseShareQueueBounded37a(t *testing.T) {
	_, rdb, e, l := shareEdge(t, 20*time.Second)
	const extra = 100
	n := responseShareQueue + responseShareBatch + extra
	// The first id's batch is held by the pause before the rest come: a
	// writer starved until the queue filled could otherwise be part-way
	// through taking its first batch when the queue is looked at (984 of
	// 1,024 once, on a loaded machine).
	unpause := holdShareWriter(t, rdb, e, "resp_0", l)
	for i := 1; i < n; i++ {
		e.d.RememberResponse("resp_"+strconv.Itoa(i), l)
	}
	s := e.d.shareResp
	if d := int(s.dropped.Load()); d < extra || d > n-responseShareQueue {
		t.Errorf("%d of %d ids dropped, want %d to %d", d, n, extra, n-responseShareQueue)
	}
	if q := len(s.q); q != responseShareQueue {
		t.Errorf("%d ids queued, want the bound %d", q, responseShareQueue)
	}
	e.d.mu.Lock()
	kept := len(e.d.responses.m)
	e.d.mu.Unlock()
	if kept != n {
		t.Errorf("this edge remembers %d ids, want all %d", kept, n)
	}
	unpause()
	waitFor(t, "the queue drained", func() bool { return len(s.q) == 0 })
	e.d.RememberResponse("resp_last", l)
	if d := int(s.dropped.Load()); d > n-responseShareQueue {
		t.Errorf("resp_last dropped with the queue empty")
	}
	waitRedisKey(t, rdb, "iop:resp:resp_last")
}

// Redis down: a write is lost (this edge still knows the id), later ones
// are made once it answers again; a lookup routes as usual, bounded by
// the request's context when that ends before the ledger's timeout.
func TestResponseShareRedisDown37a(t *testing.T) {
	rs, rdb, e, l := shareEdge(t, 20*time.Second)
	l.Release(ReasonCompleted)
	rs.Stop()
	e.d.RememberResponse("resp_lost", l)
	waitFor(t, "the write failed", func() bool { return e.d.shareResp.failed.Load() >= 1 })
	e.d.mu.Lock()
	k, ok := e.d.responses.get("resp_lost")
	e.d.mu.Unlock()
	if !ok || k != l.res.key {
		t.Errorf("this edge's own record went with Redis: %v %v", k, ok)
	}
	rs.Restart()
	ctx := context.Background()
	e.d.RememberResponse("resp_after", l)
	waitRedisKey(t, rdb, "iop:resp:resp_after")
	if rdb.Exists(ctx, "iop:resp:resp_lost").Val() != 0 {
		t.Error("the write made while Redis was down reached it")
	}

	// Paused (every command waits 30 s; the ledger's timeout is 20 s):
	// the lookup ends with the request's context, and records nothing.
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	e.d.learnResponse(rctx, "m", "resp_paused")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the lookup took %v, past the request's 300 ms", took)
	}
	e.d.mu.Lock()
	_, ok = e.d.responses.get("resp_paused")
	e.d.mu.Unlock()
	if ok {
		t.Error("a failed lookup recorded an owner")
	}
	rs.Stop() // not left to answer the dispatcher's last returns when the pause ends
}

// While grants fail at once (a take found Redis silent: ledgerDownUntil),
// a follow-up's lookup is not tried either: the request fails at once
// with ErrClusterUnavailable instead of first waiting out the ledger's
// timeout on a Redis that does not answer.
func TestNoLookupWhileLedgerDown37a(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", 20*time.Second)
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	e.d.mu.Lock()
	e.d.ledgerDownUntil = time.Now().Add(time.Hour)
	e.d.mu.Unlock()
	start := time.Now()
	if got := acquireErr(e.d, Request{Model: "m", PreviousResponseID: "resp_1"}); !errors.Is(got, ErrClusterUnavailable) {
		t.Errorf("a follow-up with the ledger down: %v, want ErrClusterUnavailable", got)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("it took %v: the lookup waited on the silent Redis", took)
	}
	rs.Stop() // not left to answer the dispatcher's last returns when the pause ends
}

// acquireErr is the error of an Acquire of req (a lease it got is
// released at once).
func acquireErr(d *Dispatcher, req Request) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	l, err := d.Acquire(ctx, req)
	if l != nil {
		l.Release(ReasonCompleted)
	}
	return err
}

// BenchmarkFollowUpAcquire37a is a follow-up's Acquire (and release) in
// a cluster, its previous response known to this edge or not (one Redis
// lookup more, that misses), against a real redis-server on loopback.
func BenchmarkFollowUpAcquire37a(b *testing.B) {
	rs := testredis.Start(b)
	for _, known := range []bool{true, false} {
		b.Run("known="+strconv.FormatBool(known), func(b *testing.B) {
			lc := cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: "e1"}
			led := cluster.Open(lc)
			f := &fixture{t: b, reg: prometheus.NewRegistry(), bus: &recBus{}}
			f.d = New(twoProviderCfg(b), Options{Bus: f.bus, Metrics: NewMetrics(f.reg), Ledger: led, LedgerTTL: lc.TTL})
			defer func() { f.d.Close(); _ = led.Close() }()
			f.up("a")
			id := "resp_" + strconv.FormatBool(known)
			if known {
				l := mustAcquire(b, f.d, Request{Model: "only-p2"})
				f.d.RememberResponse(id, l)
				l.Release(ReasonCompleted)
			}
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				l, err := f.d.Acquire(ctx, Request{Model: "m", PreviousResponseID: id})
				if err != nil {
					b.Fatal(err)
				}
				l.Release(ReasonCompleted)
			}
		})
	}
}
