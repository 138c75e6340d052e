package dispatch

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// ledgerFixture is a fixture whose dispatcher of cfg (with opts) keeps its
// leases, of lc's TTL, in a ledger opened with lc. Nothing is closed at
// cleanup: the caller closes the dispatcher, then the ledger.
func ledgerFixture(t *testing.T, cfg *config.Edge, lc cluster.Config, opts Options) (*fixture, *cluster.Ledger) {
	t.Helper()
	led := cluster.Open(lc)
	f := &fixture{t: t, reg: prometheus.NewRegistry(), bus: &recBus{}}
	opts.Bus, opts.Metrics, opts.Ledger, opts.LedgerTTL = f.bus, NewMetrics(f.reg), led, lc.TTL
	f.d = New(cfg, opts)
	return f, led
}

// closedLedgerFixture is ledgerFixture whose dispatcher is closed at
// cleanup, then the ledger.
func closedLedgerFixture(t *testing.T, cfg *config.Edge, lc cluster.Config, opts Options) *fixture {
	t.Helper()
	f, led := ledgerFixture(t, cfg, lc, opts)
	t.Cleanup(func() {
		f.d.Close()
		f.wg.Wait()
		_ = led.Close()
	})
	return f
}

// newClusterFixture is newFixture with a ledger on rs (a real
// redis-server); the ledger is closed after the dispatcher.
func newClusterFixture(t *testing.T, cfg *config.Edge, rs *testredis.Server) *fixture {
	t.Helper()
	return closedLedgerFixture(t, cfg, cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
}

// oneProviderCfg is node n with provider p of capacity cap, model m on it
// queueing up to 30 s.
func oneProviderCfg(t *testing.T, cap int) *config.Edge {
	t.Helper()
	return buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: cap}}}},
		[]tModel{{name: "m", timeout: 30, cands: []string{"n/p"}}})
}

// oneSlotCluster is a cluster fixture on its own redis-server: node n
// (ready) with provider p of capacity 1, model m on it queueing up to 30 s.
func oneSlotCluster(t *testing.T) (*fixture, *testredis.Server) {
	t.Helper()
	rs := testredis.Start(t)
	f := newClusterFixture(t, oneProviderCfg(t, 1), rs)
	f.up("n")
	return f, rs
}

// pauseRedis makes every client's next commands on rs wait ms
// milliseconds (CLIENT PAUSE).
func pauseRedis(t *testing.T, rs *testredis.Server, ms int) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", strconv.Itoa(ms), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
}

// onlyAnnouncementsWake makes the cluster loop's retry tick an hour for a
// test's dispatchers (set before they start, restored after their Close:
// cleanups run last first), so that only announcements wake a provider.
func onlyAnnouncementsWake(t *testing.T) {
	was := retryRemoteFull
	t.Cleanup(func() { retryRemoteFull = was })
	retryRemoteFull = time.Hour
}

// otherEdgeHolds puts a lease of another edge, live for a minute, in
// key's ledger entry, and returns a client of rs to take it back with
// (closed at cleanup).
func otherEdgeHolds(t *testing.T, rs *testredis.Server, key, id string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	return rdb
}

// A waiter whose grant failed because Redis was down keeps its place and
// is served once Redis answers again, without any other event (no return
// is announced: the lease given back during the outage never reached the
// ledger).
func TestClusterWaiterServedAfterRedisOutage(t *testing.T) {
	f, rs := oneSlotCluster(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	rs.Stop()
	l.Release(ReasonCompleted) // the queued grant fails: Redis is down
	rs.Restart()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		r.l.Release(ReasonCompleted)
	case <-time.After(8 * time.Second):
		t.Fatal("the waiter was never served after Redis came back")
	}
}

// Leases are granted (Redis round trip with the lock released) while a
// reload changes the provider's capacity: no data race on the spec.
func TestClusterGrantConcurrentWithReload(t *testing.T) {
	rs := testredis.Start(t)
	cfgOf := func(capacity int) *config.Edge {
		return buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: capacity}}}},
			[]tModel{{name: "m", cands: []string{"n/p"}}})
	}
	f := newClusterFixture(t, cfgOf(64), rs)
	f.up("n")
	stop := make(chan struct{})
	stopReloads := sync.OnceFunc(func() { close(stop) })
	// An Acquire that fails the test stops the reloads too (before the
	// fixture's cleanup closes the dispatcher under them).
	t.Cleanup(stopReloads)
	done := make(chan struct{})
	// Owner: the test; stops when stop is closed.
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f.d.Reload(cfgOf(64 + i%2))
		}
	}()
	for range 200 {
		mustAcquire(t, f.d, Request{Model: "m"}).Release(ReasonCompleted)
	}
	stopReloads()
	// A Reload that never returns (a lock never released) fails here.
	await(t, done, "the reloads to end")
}

// A reload that removes the model while a grant's Redis round trip is
// under way ends the Acquire with ErrModelNotFound instead of picking
// from the removed model for ever.
func TestClusterAcquireEndsWhenModelRemovedDuringTake(t *testing.T) {
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 4}}}},
		[]tModel{{name: "m", cands: []string{"n/p"}}, {name: "other", cands: []string{"n/p"}}})
	f := newClusterFixture(t, cfg, rs)
	f.up("n")
	mustAcquire(t, f.d, Request{Model: "m"}).Release(ReasonCompleted) // scripts loaded
	// Every Redis command of the dispatcher now waits 500 ms: the Take
	// below is in flight while the reload runs.
	pauseRedis(t, rs, 500)
	ch := f.acquireAsync(context.Background(), Request{Model: "m"})
	time.Sleep(100 * time.Millisecond)
	f.d.Reload(buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 4}}}},
		[]tModel{{name: "other", cands: []string{"n/p"}}}))
	select {
	case r := <-ch:
		wantErr(t, r.err, ErrModelNotFound)
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still running 5s after its model was removed")
	}
}

// A waiter served (or gone) at once after it was queued leaves no entry
// in the cluster's wait set: were its registration to reach Redis after
// its removal, the other edges would yield to a waiter that no longer
// exists for up to cluster.MaxYield.
func TestClusterServedWaiterLeavesNoWaitEntry(t *testing.T) {
	f, rs := oneSlotCluster(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	waitKey := cluster.WaitKey("m", queueOf(false, false))
	l := mustAcquire(t, f.d, Request{Model: "m"})
	// The waiter is served between being queued and anything after.
	testHookQueued = func() {
		l.Release(ReasonCompleted)
		waitFor(t, "the served waiter's removal sent", func() bool {
			f.d.mu.Lock()
			defer f.d.mu.Unlock()
			return pendingOf(f.d.statusLocked(), "m") == 0 && len(f.d.returns) == 0
		})
		time.Sleep(100 * time.Millisecond) // the returner's Redis calls
	}
	defer func() { testHookQueued = nil }()
	r := recv(t, f.acquireAsync(context.Background(), Request{Model: "m"}))
	testHookQueued = nil
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Release(ReasonCompleted)
	time.Sleep(300 * time.Millisecond) // what the returner still has
	if n, err := rdb.ZCard(context.Background(), waitKey).Result(); err != nil || n != 0 {
		t.Fatalf("wait set holds %d entries (%v) after its only waiter was served", n, err)
	}
}

// A burst of waiters' registrations cannot crowd lease returns out of
// the returner's queue: past waitQueue they are dropped, and a return
// still finds room.
func TestClusterWaitersLeaveRoomForReturns(t *testing.T) {
	led := cluster.Open(cluster.Config{Address: "127.0.0.1:1", TTL: time.Second, Timeout: time.Second, EdgeID: "e1"})
	defer led.Close()
	// No returner runs: what is queued stays queued.
	d := &Dispatcher{ctx: context.Background(), ledger: led, returns: make(chan cluster.Update, returnQueue), log: zap.NewNop()}
	m := &model{name: "m"}
	for range returnQueue {
		d.waitLocked(&waiter{model: m}, 0)
	}
	if n := len(d.returns); n != waitQueue {
		t.Fatalf("%d registrations queued, want %d", n, waitQueue)
	}
	r := &resource{ledgerKey: cluster.Key("n", "p")}
	for i := range returnQueue - waitQueue {
		d.returnLocked(r, led.NewLeaseID())
		if n := len(d.returns); n != waitQueue+i+1 {
			t.Fatalf("return %d not queued (%d in the queue)", i, n)
		}
	}
}

// Handing a released slot on to a waiter takes its Redis slot with the
// dispatcher's lock released: a slow Redis delays that waiter, not every
// other call of the edge (here Status, and a lease of another model).
func TestClusterHandOnDoesNotHoldLockAcrossRedis(t *testing.T) {
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 1}}}, {id: "o", provs: []tProv{{name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 30, cands: []string{"n/p"}}, {name: "other", cands: []string{"o/q"}}})
	f := newClusterFixture(t, cfg, rs)
	f.up("n")
	f.up("o")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	// The dispatcher's Redis calls now wait 2 s: Status and Release,
	// which take microseconds without the lock held across Redis, are
	// allowed half of it (a machine at load 30 delays them a few hundred
	// ms at most), and either waits out most of the pause with it held.
	const pause = 2 * time.Second
	pauseRedis(t, rs, int(pause.Milliseconds()))
	paused := time.Now()
	released := make(chan struct{})
	// Owner: the test; Release returns at once, or after the pause.
	go func() { l.Release(ReasonCompleted); close(released) }()
	time.Sleep(50 * time.Millisecond) // the hand-on's Take is in flight
	start := time.Now()
	_ = f.d.Status()
	if took := time.Since(start); took > pause/2 {
		t.Errorf("Status took %s during a hand-on's Redis round trip (Redis paused %v)", took, pause)
	}
	select {
	case <-released:
	case <-time.After(pause / 2):
		t.Errorf("Release blocked for the hand-on's Redis round trip (Redis paused %v)", pause)
	}
	select {
	case <-released:
	case <-time.After(waitDeadline):
		t.Fatalf("Release not returned %v after Redis was paused for %v", waitDeadline, pause)
	}
	r := recv(t, ch)
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if waited := time.Since(paused); waited < pause*9/10 {
		t.Errorf("waiter served after %s, before Redis answered (paused %v)", waited, pause)
	}
	r.l.Release(ReasonCompleted)
}

// A waiter that gives up while a slot is being handed on to it leaves at
// once; the slot, its ledger entry returned, goes to the next waiter.
func TestClusterWaiterGivesUpDuringHandOn(t *testing.T) {
	f, rs := oneSlotCluster(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := f.enqueue(ctxA, Request{Model: "m"})
	b := f.enqueue(context.Background(), Request{Model: "m"})
	pauseRedis(t, rs, 500)
	l.Release(ReasonCompleted) // the hand-on to a waits for Redis
	time.Sleep(50 * time.Millisecond)
	cancelA()
	select {
	case r := <-a:
		wantErr(t, r.err, context.Canceled)
	case <-time.After(300 * time.Millisecond):
		t.Fatal("the waiter that gave up was held for the hand-on's round trip")
	}
	lb := recvLease(t, b)
	waitFor(t, "one lease in the ledger: b's", func() bool {
		held, err := f.d.ClusterHeld(context.Background())
		return err == nil && held["n/p"] == 1
	})
	lb.Release(ReasonCompleted)
	waitFor(t, "no lease in the ledger", func() bool {
		held, err := f.d.ClusterHeld(context.Background())
		return err == nil && held["n/p"] == 0
	})
}

// Close during a hand-on's round trip fails the waiter with
// ErrDispatcherShutdown and waits for the hand-on to end.
func TestClusterCloseDuringHandOn(t *testing.T) {
	f, rs := oneSlotCluster(t)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	w := f.enqueue(context.Background(), Request{Model: "m"})
	pauseRedis(t, rs, 500)
	l.Release(ReasonCompleted)
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	// Owner: the test; ends when Close returns.
	go func() { f.d.Close(); close(closed) }()
	wantErr(t, recv(t, w).err, ErrDispatcherShutdown)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
}

// A return announced while a hand-on's Take is in flight is not lost: the
// ledger's Full, which may predate the return, does not park the provider
// until the next wake; the hand-on is tried again at once. Here only
// announcements wake a provider (the retry tick is an hour).
func TestClusterAnnouncementDuringHandOnIsNotLost(t *testing.T) {
	onlyAnnouncementsWake(t)
	f, rs := oneSlotCluster(t)
	ctx := context.Background()
	key := cluster.Key("n", "p")
	rdb := otherEdgeHolds(t, rs, key, "other/1") // the only slot
	ch := f.enqueue(ctx, Request{Model: "m"})    // the ledger said Full: queued
	announce := func() { f.d.wake(func(r *resource) bool { return r.ledgerKey == key }) }
	pauseRedis(t, rs, 300)
	announce() // a hand-on starts; its Take waits for Redis
	time.Sleep(50 * time.Millisecond)
	// The other edge returns its lease (queued in Redis behind the Take,
	// which therefore answers Full) and announces it while the Take is
	// in flight.
	zrem := make(chan error, 1)
	// Owner: the test; ends when Redis answers, after the pause.
	go func() { zrem <- rdb.ZRem(ctx, key, "other/1").Err() }()
	time.Sleep(50 * time.Millisecond)
	announce()
	if err := <-zrem; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.l.Release(ReasonCompleted)
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter was not served: the announcement during the hand-on was lost")
	}
}

// A node that registers again while a slot of it is being handed on (a
// new generation, whose activation passes the waiter over) still serves
// the waiter once the round trip ends. (The return of the stale ledger
// slot is announced and would wake the provider too; the hand-on does not
// wait for that announcement, which pub/sub may drop.)
func TestClusterHandOnAcrossNewGeneration(t *testing.T) {
	onlyAnnouncementsWake(t)
	rs := testredis.Start(t)
	f := newClusterFixture(t, oneProviderCfg(t, 1), rs)
	old := f.up("n")
	ctx := context.Background()
	key := cluster.Key("n", "p")
	rdb := otherEdgeHolds(t, rs, key, "other/1") // the only slot: the request queues
	ch := f.enqueue(ctx, Request{Model: "m"})
	if err := rdb.ZRem(ctx, key, "other/1").Err(); err != nil {
		t.Fatal(err)
	}
	pauseRedis(t, rs, 300)
	// The return's announcement: a hand-on starts, its Take (which will
	// find the slot free) waits for Redis.
	f.d.wake(func(r *resource) bool { return r.ledgerKey == key })
	time.Sleep(50 * time.Millisecond)
	f.d.Closed(old, nil) // the session ends and the node registers again:
	f.up("n")            // a new generation
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.l.Release(ReasonCompleted)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not served by the node's new generation")
	}
}

// Close while a fresh request's ledger round trip has the lock released
// (the round trip answering Full): the request must not queue after Close
// has failed the waiters, where nothing fails it before its queue timeout;
// it ends with ErrDispatcherShutdown at once.
func TestClusterCloseDuringFreshTake(t *testing.T) {
	onlyAnnouncementsWake(t)
	f, rs := oneSlotCluster(t)
	otherEdgeHolds(t, rs, cluster.Key("n", "p"), "other/1") // the only slot: Full
	pauseRedis(t, rs, 200)
	ch := f.acquireAsync(context.Background(), Request{Model: "m"})
	time.Sleep(50 * time.Millisecond) // its Take waits for Redis
	f.d.mu.Lock()
	time.Sleep(700 * time.Millisecond) // the Take answers Full; the Acquire waits for the lock
	// Close's steps, in its order, the lock taken before the Acquire's.
	f.d.cancel()
	for _, m := range f.d.models {
		f.d.failWaitersLocked(m, ErrDispatcherShutdown)
	}
	f.d.mu.Unlock()
	select {
	case r := <-ch:
		wantErr(t, r.err, ErrDispatcherShutdown)
	case <-time.After(3 * time.Second):
		t.Fatal("the request queued after Close and was never failed")
	}
}
