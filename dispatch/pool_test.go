package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// selectionCfg: node a has p1 (capacity 4, long 1) and p2 (capacity 2, long
// 1); node b has an unreferenced provider u. "only-p1"/"only-p2" pin leases
// to one provider; "both" prefers p1, "both-rev" prefers p2.
func selectionFixture(t *testing.T) *fixture {
	cfg := buildCfg(t,
		[]tNode{{id: "a", provs: []tProv{{name: "p1", cap: 4, long: 1}, {name: "p2", cap: 2, long: 1}}},
			{id: "b", provs: []tProv{{name: "u", cap: 3}, {name: "v", cap: 1}}}},
		[]tModel{
			{name: "only-p1", long: 100, cands: []string{"a/p1"}},
			{name: "only-p2", long: 100, cands: []string{"a/p2"}},
			{name: "both", long: 100, cands: []string{"a/p1", "a/p2"}},
			{name: "both-rev", long: 100, cands: []string{"a/p2", "a/p1"}},
			{name: "on-b", cands: []string{"b/v"}},
		})
	f := newFixture(t, cfg, nil)
	f.up("a")
	f.up("b")
	return f
}

func TestSelectLeastLoaded(t *testing.T) {
	cases := []struct {
		name       string
		p1, p2     int // leases held before (p1 capacity 4, p2 capacity 2)
		model      string
		wantTarget string
	}{
		{"both idle: configured order", 0, 0, "both", "p1"},
		{"both idle: configured order reversed", 0, 0, "both-rev", "p2"},
		{"p1 busier", 1, 0, "both", "p2"},
		{"relative to capacity: 1/4 beats 1/2", 1, 1, "both", "p1"},
		{"relative to capacity, reversed order", 1, 1, "both-rev", "p1"},
		{"tie 2/4 = 1/2: configured order", 2, 1, "both", "p1"},
		{"tie 2/4 = 1/2: reversed order", 2, 1, "both-rev", "p2"},
		{"p2 full", 3, 2, "both", "p1"},
		{"3/4 vs 1/2", 3, 1, "both", "p2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := selectionFixture(t)
			for range tc.p1 {
				mustAcquire(t, f.d, Request{Model: "only-p1"})
			}
			for range tc.p2 {
				mustAcquire(t, f.d, Request{Model: "only-p2"})
			}
			l := mustAcquire(t, f.d, Request{Model: tc.model})
			if l.ProviderID != tc.wantTarget || l.Target != "target-"+tc.wantTarget || l.NodeID != "a" || l.Model != tc.model {
				t.Fatalf("leased %s/%s (target %s), want %s", l.NodeID, l.ProviderID, l.Target, tc.wantTarget)
			}
		})
	}
}

func TestSelectLongRequests(t *testing.T) {
	cases := []struct {
		name     string
		heldLong []string // "p1"/"p2": long leases held before
		heldNorm []string
		tokens   int
		wantProv string // "" means it must queue
		wantLong bool
	}{
		{"below threshold is normal", nil, nil, 99, "p1", false},
		{"at threshold is long", nil, nil, 100, "p1", true},
		{"above threshold is long", nil, nil, 5000, "p1", true},
		{"long skips a provider whose long slots are full", []string{"p1"}, nil, 100, "p2", true},
		{"normal still uses it", []string{"p1"}, []string{"p2"}, 10, "p1", false},
		{"long goes to the more loaded provider that has a long slot", []string{"p2"}, []string{"p1", "p1", "p1"}, 100, "p1", true},
		{"normal goes to the less loaded one meanwhile", []string{"p2"}, []string{"p1", "p1", "p1"}, 99, "p2", false},
		{"long needs a free long slot even when capacity remains", []string{"p1", "p2"}, nil, 100, "", true},
		{"normal fits while long slots are full", []string{"p1", "p2"}, nil, 99, "p1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := selectionFixture(t)
			for _, p := range tc.heldLong {
				if l := mustAcquire(t, f.d, Request{Model: "only-" + p, PromptTokens: 100}); !l.Long {
					t.Fatal("setup lease not long")
				}
			}
			for _, p := range tc.heldNorm {
				mustAcquire(t, f.d, Request{Model: "only-" + p})
			}
			req := Request{Model: "both", PromptTokens: tc.tokens}
			if tc.wantProv == "" {
				ctx, cancel := context.WithCancel(context.Background())
				ch := f.enqueue(ctx, req)
				st := f.d.Status()
				for _, p := range []string{"p1", "p2"} {
					if ps := provOf(st, "a", p); ps.Queued != 1 || ps.LongQueued != 1 {
						t.Fatalf("%s: %+v", p, *ps)
					}
				}
				cancel()
				wantErr(t, recv(t, ch).err, context.Canceled)
				return
			}
			l := mustAcquire(t, f.d, req)
			if l.ProviderID != tc.wantProv || l.Long != tc.wantLong {
				t.Fatalf("leased %s long=%v, want %s long=%v", l.ProviderID, l.Long, tc.wantProv, tc.wantLong)
			}
			ps := provOf(f.d.Status(), "a", l.ProviderID)
			if ps.LongInFlight > ps.LongCapacity || ps.InFlight > ps.Capacity {
				t.Fatalf("over capacity: %+v", *ps)
			}
		})
	}
}

// A model without long_context_tokens never makes a request long.
func TestNoLongThreshold(t *testing.T) {
	f := selectionFixture(t)
	if l := mustAcquire(t, f.d, Request{Model: "on-b", PromptTokens: 1 << 30}); l.Long {
		t.Fatal("request long without a threshold")
	}
}

func TestSessionAffinity(t *testing.T) {
	f := selectionFixture(t)
	s := Request{Model: "both", SessionID: "sess-1"}
	first := mustAcquire(t, f.d, s)
	if first.ProviderID != "p1" || first.SessionID != "sess-1" {
		t.Fatalf("first = %s", first.ProviderID)
	}
	// p1 is now the more loaded (and stays so): the session still prefers
	// it while it has room.
	held := []*Lease{first, mustAcquire(t, f.d, Request{Model: "only-p1"})}
	for i := range 2 {
		l := mustAcquire(t, f.d, s)
		if l.ProviderID != "p1" {
			t.Fatalf("affine request %d went to %s", i, l.ProviderID)
		}
		held = append(held, l)
	}
	// p1 is full (4/4): fall back to a provider with room.
	if l := mustAcquire(t, f.d, s); l.ProviderID != "p2" {
		t.Fatalf("fallback went to %s", l.ProviderID)
	}
	// The session now prefers p2, even when p1 is the lighter one
	// (1/4 against 1/2).
	for _, l := range held[:3] {
		l.Release(ReasonCompleted)
	}
	if l := mustAcquire(t, f.d, s); l.ProviderID != "p2" {
		t.Fatalf("affinity not moved to p2: %s", l.ProviderID)
	}
	// Another session follows least load.
	if l := mustAcquire(t, f.d, Request{Model: "both", SessionID: "sess-2"}); l.ProviderID != "p1" {
		t.Fatalf("new session went to %s", l.ProviderID)
	}
	// Affinity to a provider that is not a candidate of the model is
	// ignored.
	if l := mustAcquire(t, f.d, Request{Model: "on-b", SessionID: "sess-1"}); l.ProviderID != "v" {
		t.Fatalf("on-b went to %s", l.ProviderID)
	}
}

// Affinity also applies to a long request only while the affine provider
// has a long slot.
func TestSessionAffinityLong(t *testing.T) {
	f := selectionFixture(t)
	s := Request{Model: "both", SessionID: "s", PromptTokens: 100}
	if l := mustAcquire(t, f.d, s); l.ProviderID != "p1" || !l.Long {
		t.Fatalf("first long: %s %v", l.ProviderID, l.Long)
	}
	if l := mustAcquire(t, f.d, s); l.ProviderID != "p2" {
		t.Fatalf("long with p1's long slot full went to %s", l.ProviderID)
	}
}

// A live provider no model references is listed as disabled with its
// figures, but never leased.
func TestUnreferencedProviderListedNotLeased(t *testing.T) {
	cfg := buildCfg(t,
		[]tNode{{id: "a", provs: []tProv{{name: "used", cap: 1}, {name: "spare", cap: 5, long: 2}}}, {id: "b", provs: []tProv{{name: "lonely", cap: 3}}}},
		[]tModel{{name: "m", maxQueue: 4, cands: []string{"a/used"}}})
	f := newFixture(t, cfg, nil)
	// Only an unreferenced provider is live: not dispatchable.
	f.up("b")
	if f.d.Dispatchable() {
		t.Fatal("dispatchable with only an unreferenced provider live")
	}
	st := f.d.Status()
	if p := provOf(st, "b", "lonely"); p.Status != "disabled" || p.Health != "ok" || p.Capacity != 3 || p.InFlight != 0 {
		t.Fatalf("lonely: %+v", *p)
	}
	assertOffline(t, provOf(st, "a", "spare"))

	f.up("a")
	if !f.d.Dispatchable() {
		t.Fatal("not dispatchable")
	}
	l := mustAcquire(t, f.d, Request{Model: "m"})
	// "used" is full; the spare, with 5 free slots on the same node, is
	// never a fallback.
	var chans []<-chan acqResult
	for range 3 {
		chans = append(chans, f.enqueue(context.Background(), Request{Model: "m"}))
	}
	st = f.d.Status()
	if p := provOf(st, "a", "spare"); p.Status != "disabled" || p.Capacity != 5 || p.LongCapacity != 2 || p.InFlight != 0 || p.Queued != 0 {
		t.Fatalf("spare: %+v", *p)
	}
	if p := provOf(st, "a", "used"); p.Status != "available" || p.InFlight != 1 || p.Queued != 3 {
		t.Fatalf("used: %+v", *p)
	}
	for _, ch := range chans {
		l.Release(ReasonCompleted)
		l = recvLease(t, ch)
		if l.ProviderID != "used" {
			t.Fatalf("leased %s", l.ProviderID)
		}
	}
	l.Release(ReasonCompleted)
	if got := metricValue(t, f.reg, "iop_lease_acquired_total", map[string]string{"provider": "spare"}); got != 0 {
		t.Fatalf("spare leased %v times", got)
	}
}

func TestUnknownModel(t *testing.T) {
	f := selectionFixture(t)
	_, err := f.d.Acquire(context.Background(), Request{Model: "nope"})
	wantErr(t, err, ErrModelNotFound)
}

// queueFixture: one node with provider p (capacity cap, long long), model m
// on it with the given queue settings.
func queueFixture(t *testing.T, cap, long int, m tModel) *fixture {
	m.name = "m"
	m.cands = []string{"a/p"}
	f := newFixture(t, buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: cap, long: long}}}}, []tModel{m}), nil)
	f.up("a")
	return f
}

func TestQueueFull(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{maxQueue: 2})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w1 := f.enqueue(ctx, Request{Model: "m"})
	w2 := f.enqueue(ctx, Request{Model: "m"})
	start := time.Now()
	_, err := f.d.Acquire(context.Background(), Request{Model: "m"})
	wantErr(t, err, ErrQueueFull)
	if d := time.Since(start); d > waitDeadline/2 {
		t.Fatalf("queue full took %s", d)
	}
	if pendingOf(f.d.Status(), "m") != 2 {
		t.Fatal("pending changed by a refused request")
	}
	// A slot frees: the queue shrinks and admits again.
	l.Release(ReasonCompleted)
	l1 := recvLease(t, w1)
	w3 := f.enqueue(ctx, Request{Model: "m"})
	l1.Release(ReasonCompleted)
	recvLease(t, w2).Release(ReasonCompleted)
	recvLease(t, w3).Release(ReasonCompleted)
}

func TestNoQueueing(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{maxQueue: -1})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	_, err := f.d.Acquire(context.Background(), Request{Model: "m"})
	wantErr(t, err, ErrQueueFull)
	l.Release(ReasonCompleted)
	mustAcquire(t, f.d, Request{Model: "m"})
}

func TestQueueTimeout(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{timeout: 0.2})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	start := time.Now()
	_, err := f.d.Acquire(context.Background(), Request{Model: "m"})
	wantErr(t, err, ErrQueueTimeout)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("timed out after %s, before queue_timeout_sec", d)
	}
	if pendingOf(f.d.Status(), "m") != 0 {
		t.Fatal("timed-out waiter still queued")
	}
	// The timed-out waiter does not take the next free slot.
	l.Release(ReasonCompleted)
	if p := provOf(f.d.Status(), "a", "p"); p.InFlight != 0 || p.Queued != 0 {
		t.Fatalf("after release: %+v", *p)
	}
	if got := metricValue(t, f.reg, "iop_lease_acquired_total", nil); got != 1 {
		t.Fatalf("acquired = %v", got)
	}
}

// A waiter whose context ends leaves the queue at once: by the time Acquire
// returns, the pending count and queued figures no longer include it, and a
// later free slot goes to the next waiter.
func TestQueueCancelLeavesAtOnce(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{timeout: 60})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctx1, cancel1 := context.WithCancel(context.Background())
	w1 := f.enqueue(ctx1, Request{Model: "m"})
	w2 := f.enqueue(context.Background(), Request{Model: "m"})
	if p := provOf(f.d.Status(), "a", "p"); p.Queued != 2 {
		t.Fatalf("queued = %d", p.Queued)
	}
	start := time.Now()
	cancel1()
	wantErr(t, recv(t, w1).err, context.Canceled)
	if d := time.Since(start); d > waitDeadline/2 {
		t.Fatalf("cancel took %s", d)
	}
	st := f.d.Status()
	if pendingOf(st, "m") != 1 || provOf(st, "a", "p").Queued != 1 {
		t.Fatalf("after cancel: pending %d %+v", pendingOf(st, "m"), *provOf(st, "a", "p"))
	}
	l.Release(ReasonCompleted)
	recvLease(t, w2).Release(ReasonCompleted)

	// A deadline behaves the same way and returns the context's error.
	l = mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.d.Acquire(ctx, Request{Model: "m"})
	wantErr(t, err, context.DeadlineExceeded)
	if pendingOf(f.d.Status(), "m") != 0 {
		t.Fatal("expired waiter still queued")
	}
	l.Release(ReasonCompleted)
}

// Releases pump the oldest fitting waiter, first come first served.
func TestQueueFIFO(t *testing.T) {
	f := queueFixture(t, 2, 0, tModel{timeout: 60})
	held := []*Lease{mustAcquire(t, f.d, Request{Model: "m"}), mustAcquire(t, f.d, Request{Model: "m"})}
	const n = 6
	var waiters []<-chan acqResult
	for i := range n {
		waiters = append(waiters, f.enqueue(context.Background(), Request{Model: "m", SessionID: fmt.Sprint("s", i)}))
	}
	for i := range n {
		// Release one slot: exactly the oldest waiter gets it in the same
		// step; the younger ones still wait.
		held[0].Release(ReasonCompleted)
		held = held[1:]
		if got := pendingOf(f.d.Status(), "m"); got != n-i-1 {
			t.Fatalf("after release %d: pending %d", i, got)
		}
		l := recvLease(t, waiters[i])
		if l.SessionID != fmt.Sprint("s", i) {
			t.Fatalf("release %d went to %s", i, l.SessionID)
		}
		held = append(held, l)
	}
	for _, l := range held {
		l.Release(ReasonCompleted)
	}
}

// A long waiter is skipped only while the long slots are full; when a long
// slot frees it goes to the long waiter ahead of every younger request, and
// new arrivals cannot overtake it.
func TestLongWaiterNotStarved(t *testing.T) {
	f := queueFixture(t, 2, 1, tModel{timeout: 60, long: 100})
	long := Request{Model: "m", PromptTokens: 100}
	norm := Request{Model: "m", PromptTokens: 1}
	heldLong := mustAcquire(t, f.d, long)
	heldNorm := mustAcquire(t, f.d, norm)
	ctx := context.Background()
	lw := f.enqueue(ctx, Request{Model: "m", PromptTokens: 100, SessionID: "long-waiter"})
	n1 := f.enqueue(ctx, Request{Model: "m", SessionID: "n1"})
	n2 := f.enqueue(ctx, Request{Model: "m", SessionID: "n2"})
	if p := provOf(f.d.Status(), "a", "p"); p.Queued != 3 || p.LongQueued != 1 {
		t.Fatalf("queued: %+v", *p)
	}

	// A normal slot frees: the long waiter cannot use it (long slots full),
	// so the oldest normal waiter gets it.
	heldNorm.Release(ReasonCompleted)
	ln1 := recvLease(t, n1)
	if ln1.SessionID != "n1" {
		t.Fatalf("got %s", ln1.SessionID)
	}
	// Normal traffic keeps the node full; the long lease returns: its slot
	// goes to the long waiter, not to the older-queued normal n2 behind it.
	heldLong.Release(ReasonCompleted)
	llw := recvLease(t, lw)
	if !llw.Long || llw.SessionID != "long-waiter" {
		t.Fatalf("long waiter lease: %+v", llw)
	}
	if pendingOf(f.d.Status(), "m") != 1 {
		t.Fatal("n2 should still wait")
	}
	// A new long arrival queues behind (long slot full again).
	ctx2, cancel2 := context.WithCancel(ctx)
	late := f.enqueue(ctx2, long)
	ln1.Release(ReasonCompleted)
	recvLease(t, n2).Release(ReasonCompleted)
	llw.Release(ReasonCompleted)
	recvLease(t, late).Release(ReasonCompleted)
	cancel2()
}

// A long waiter queued before normal waiters, with normal capacity free but
// the long slot taken, is served as soon as the long slot frees even if
// normal requests keep arriving and taking the normal slots.
func TestLongWaiterNotStarvedByArrivals(t *testing.T) {
	f := queueFixture(t, 3, 1, tModel{timeout: 60, long: 100})
	heldLong := mustAcquire(t, f.d, Request{Model: "m", PromptTokens: 100})
	lw := f.enqueue(context.Background(), Request{Model: "m", PromptTokens: 500})
	// Arrivals take the free normal slots (the long waiter cannot use them).
	a1 := mustAcquire(t, f.d, Request{Model: "m"})
	a2 := mustAcquire(t, f.d, Request{Model: "m"})
	nw := f.enqueue(context.Background(), Request{Model: "m"})
	// Churn: a normal slot frees and goes to the normal waiter; the long
	// waiter still waits for the long slot.
	a1.Release(ReasonCompleted)
	a3 := recvLease(t, nw)
	if pendingOf(f.d.Status(), "m") != 1 {
		t.Fatal("long waiter should still wait")
	}
	heldLong.Release(ReasonCompleted)
	l := recvLease(t, lw)
	if !l.Long {
		t.Fatal("not long")
	}
	for _, x := range []*Lease{l, a2, a3} {
		x.Release(ReasonCompleted)
	}
}

// With every candidate's node offline the request waits (it is not refused)
// and is served when a node becomes ready.
func TestQueueWaitsForOfflineNodes(t *testing.T) {
	cfg := buildCfg(t,
		[]tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 60, cands: []string{"a/p", "b/q"}}})
	f := newFixture(t, cfg, nil)
	w := f.enqueue(context.Background(), Request{Model: "m"})
	if f.d.Dispatchable() {
		t.Fatal("dispatchable")
	}
	// A node that is only pending does not serve it.
	cb := f.register("b")
	if pendingOf(f.d.Status(), "m") != 1 {
		t.Fatal("served by a pending node")
	}
	ca := f.up("a")
	l := recvLease(t, w)
	if l.NodeID != "a" {
		t.Fatalf("served by %s", l.NodeID)
	}
	w2 := f.enqueue(context.Background(), Request{Model: "m"})
	// A loss returns the lease; the next waiter keeps waiting (the pending
	// node b does not serve it) until b is ready.
	f.d.Closed(ca, nil)
	if rel, why := l.Released(); !rel || why != ReasonNodeLost {
		t.Fatal("lease not fenced")
	}
	if pendingOf(f.d.Status(), "m") != 1 {
		t.Fatal("waiter left the queue on a loss")
	}
	f.ready(cb, "b")
	if l2 := recvLease(t, w2); l2.NodeID != "b" {
		t.Fatalf("served by %s", l2.NodeID)
	}
}

// queued/long_queued count unique pending requests per live candidate: one
// request counts for every live provider it could use; offline candidates
// show 0.
func TestQueuedCountsPerLiveCandidate(t *testing.T) {
	cfg := buildCfg(t,
		[]tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "q", cap: 1}, {name: "r", cap: 1}}}},
		[]tModel{
			{name: "x", long: 100, timeout: 60, cands: []string{"a/p", "b/q"}},
			{name: "y", long: 100, timeout: 60, cands: []string{"b/q"}},
			{name: "z", timeout: 60, cands: []string{"b/r"}},
		})
	f := newFixture(t, cfg, nil)
	f.up("a")
	cb := f.up("b")
	mustAcquire(t, f.d, Request{Model: "x"})
	mustAcquire(t, f.d, Request{Model: "x"})
	ctx := context.Background()
	f.enqueue(ctx, Request{Model: "x", PromptTokens: 100})
	f.enqueue(ctx, Request{Model: "x"})
	f.enqueue(ctx, Request{Model: "y", PromptTokens: 200})
	type qc struct{ q, lq int32 }
	check := func(want map[string]qc) {
		t.Helper()
		st := f.d.Status()
		for key, w := range want {
			node, prov := key[:1], key[2:]
			p := provOf(st, node, prov)
			if p.Queued != w.q || p.LongQueued != w.lq {
				t.Fatalf("%s: queued %d long_queued %d, want %d %d", key, p.Queued, p.LongQueued, w.q, w.lq)
			}
		}
	}
	check(map[string]qc{"a/p": {2, 1}, "b/q": {3, 2}, "b/r": {0, 0}})
	if pendingOf(f.d.Status(), "x") != 2 || pendingOf(f.d.Status(), "y") != 1 {
		t.Fatal("pending")
	}
	// b lost: its providers drop to 0; a's figures are unchanged; the
	// requests still wait.
	f.d.Closed(cb, nil)
	check(map[string]qc{"a/p": {2, 1}, "b/q": {0, 0}, "b/r": {0, 0}})
	assertOffline(t, provOf(f.d.Status(), "b", "q"))
	// b back: the two x waiters and the y waiter compete for q's single
	// slot; the oldest (the long x request) wins.
	f.up("b")
	check(map[string]qc{"a/p": {1, 0}, "b/q": {2, 1}})
}

// Every holder release frees the slot and pumps the queue at once,
// whatever the reason, including node_lost (a holder may report its
// stream's node loss before the connection's Closed callback arrives, or
// without the node being gone at all): a waiter must not be left queued
// while its live candidate shows a free slot.
func TestReleaseAnyReasonPumps(t *testing.T) {
	for _, reason := range []ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError, ReasonNodeLost} {
		t.Run(string(reason), func(t *testing.T) {
			f := queueFixture(t, 1, 0, tModel{timeout: 60})
			l := mustAcquire(t, f.d, Request{Model: "m"})
			w := f.enqueue(context.Background(), Request{Model: "m"})
			if !l.Release(reason) {
				t.Fatal("release")
			}
			if p := provOf(f.d.Status(), "a", "p"); p.InFlight != 1 || p.Queued != 0 {
				t.Fatalf("after release(%s): %+v (a waiter is stranded beside a free slot)", reason, *p)
			}
			l2 := recvLease(t, w)
			if got := metricValue(t, f.reg, "iop_lease_released_total", released("a", "p", reason)); got != 1 {
				t.Fatalf("released{%s} = %v", reason, got)
			}
			l2.Release(ReasonCompleted)
		})
	}
}

// A grant racing the waiter's cancellation or timeout never leaks a slot:
// either the caller gets the lease, or it goes back (reason cancelled) and
// the slot is free again.
func TestGiveUpRacingGrant(t *testing.T) {
	for _, mode := range []string{"cancel", "timeout"} {
		t.Run(mode, func(t *testing.T) {
			timeout := 60.0
			if mode == "timeout" {
				timeout = 0.001
			}
			f := queueFixture(t, 1, 0, tModel{timeout: timeout})
			got, gaveUp := 0, 0
			for i := range 200 {
				l := mustAcquire(t, f.d, Request{Model: "m"})
				ctx, cancel := context.WithCancel(context.Background())
				ch := f.acquireAsync(ctx, Request{Model: "m"})
				if mode == "cancel" {
					waitFor(t, "queued", func() bool { return pendingOf(f.d.Status(), "m") == 1 })
					go cancel()
				} else {
					// Jitter (not an assertion): release around the 1ms
					// queue timeout so both orders happen.
					time.Sleep(time.Duration(i%4) * 400 * time.Microsecond)
				}
				l.Release(ReasonCompleted)
				r := recv(t, ch)
				cancel()
				if r.err == nil {
					got++
					if !r.l.Release(ReasonCompleted) {
						t.Fatal("returned lease was already released")
					}
				} else {
					gaveUp++
					if mode == "cancel" {
						wantErr(t, r.err, context.Canceled)
					} else {
						wantErr(t, r.err, ErrQueueTimeout)
					}
				}
				st := f.d.Status()
				if p := provOf(st, "a", "p"); p.InFlight != 0 || p.Queued != 0 || pendingOf(st, "m") != 0 {
					t.Fatalf("slot leaked: %+v pending %d", *p, pendingOf(st, "m"))
				}
			}
			acq := metricValue(t, f.reg, "iop_lease_acquired_total", nil)
			rel := metricValue(t, f.reg, "iop_lease_released_total", nil)
			if acq != rel {
				t.Fatalf("acquired %v released %v", acq, rel)
			}
			t.Logf("%s: %d served, %d gave up", mode, got, gaveUp)
		})
	}
}
