package dispatch

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The property test drives a dispatcher with random sequences of acquires,
// releases, cancellations and node lifecycle steps, keeps an independent
// model of what must be true, and checks the dispatcher against it after
// every step.

type propProv struct {
	node, name string
	cap, long  int
	referenced bool
}

var propProvs = []propProv{
	{"A", "pa1", 2, 1, true},
	{"A", "pa2", 1, 1, true},
	{"B", "pb1", 2, 1, true},
	{"B", "pbx", 3, 3, false},
}

type propModel struct {
	name     string
	long     int // long_context_tokens
	maxQueue int
	cands    []string // provider names (unique across nodes)
}

var propModels = []propModel{
	{"m1", 100, 3, []string{"pa1", "pb1"}},
	{"m2", 0, 2, []string{"pa2"}},
	{"m3", 50, 3, []string{"pb1", "pa2"}},
}

// propVariant is one of the configs the property test reloads between:
// the providers it drops and the candidates each model has in it (a model
// absent from cands is not configured).
type propVariant struct {
	dropped []string
	cands   map[string][]string
}

var propVariants = []propVariant{
	{cands: map[string][]string{"m1": {"pa1", "pb1"}, "m2": {"pa2"}, "m3": {"pb1", "pa2"}}},
	// pa2 dropped: m2 (only pa2) goes, m3 keeps pb1.
	{dropped: []string{"pa2"}, cands: map[string][]string{"m1": {"pa1", "pb1"}, "m3": {"pb1"}}},
}

func propCfgOf(v propVariant) []tNode {
	byNode := map[string][]tProv{}
	for _, p := range propProvs {
		if !slices.Contains(v.dropped, p.name) {
			byNode[p.node] = append(byNode[p.node], tProv{p.name, p.cap, p.long})
		}
	}
	return []tNode{{id: "A", provs: byNode["A"]}, {id: "B", provs: byNode["B"]}}
}

func propEdgeCfg(t tb, v propVariant) *config.Edge {
	var ms []tModel
	for _, m := range propModels {
		cands, ok := v.cands[m.name]
		if !ok {
			continue
		}
		tm := tModel{name: m.name, long: m.long, maxQueue: m.maxQueue, timeout: 600}
		for _, c := range cands {
			tm.cands = append(tm.cands, provByName(c).node+"/"+c)
		}
		ms = append(ms, tm)
	}
	return buildCfg(t, propCfgOf(v), ms)
}

type opState uint8

const (
	opUnresolved opState = iota // Acquire has not returned (queued once settled)
	opHeld                      // returned a lease
	opFailed                    // returned an error
)

type propOp struct {
	id        int
	model     *propModel
	long      bool
	cancel    context.CancelFunc
	cancelled bool
	expect    string // grant | queue | full
	predicted string // grant: the provider the pick rule chooses
	state     opState
	err       error
	lease     *propLease
	// removed: a reload removed the op's model while it was queued.
	removed bool
}

type leaseState uint8

const (
	leaseHeld leaseState = iota
	leaseReleased
	leaseFenced
)

type propLease struct {
	l      *Lease
	state  leaseState
	reason ReleaseReason
}

type propNode struct {
	id    string
	state nodeState
	conn  *nodewire.Conn
	// running is the variant the node's session runs (the config of its
	// registration, or of its last applied refresh).
	running int
}

type propResult struct {
	id  int
	l   *Lease
	err error
}

type propMachine struct {
	d       *Dispatcher
	reg     *prometheus.Registry
	nodes   []*propNode
	ops     []*propOp
	leases  []*propLease
	stale   []*nodewire.Conn // superseded or closed connections
	cur     int              // the variant the edge runs
	results chan propResult
	wg      sync.WaitGroup // Acquire goroutines
}

func newPropMachine(rt *rapid.T) *propMachine {
	cfg := propEdgeCfg(rt, propVariants[0])
	pm := &propMachine{reg: prometheus.NewRegistry(), results: make(chan propResult, 1024)}
	pm.d = New(cfg, Options{Bus: dropBus{}, Metrics: NewMetrics(pm.reg)})
	pm.nodes = []*propNode{{id: "A"}, {id: "B"}}
	rt.Cleanup(func() {
		for _, op := range pm.ops {
			op.cancel()
		}
		pm.d.Close()
		pm.wg.Wait()
	})
	return pm
}

func provByName(name string) propProv {
	for _, p := range propProvs {
		if p.name == name {
			return p
		}
	}
	panic("no provider " + name)
}

func (pm *propMachine) node(id string) *propNode {
	for _, n := range pm.nodes {
		if n.id == id {
			return n
		}
	}
	panic("no node " + id)
}

// live: p's node is ready, and both the edge's config and the config its
// session runs have p.
func (pm *propMachine) live(p propProv) bool {
	n := pm.node(p.node)
	return n.state == stateReady && pm.configured(p.name, pm.cur) && pm.configured(p.name, n.running)
}

func (pm *propMachine) configured(prov string, variant int) bool {
	return !slices.Contains(propVariants[variant].dropped, prov)
}

// cands are m's candidates in the edge's config (nil: m is not configured).
func (pm *propMachine) cands(m *propModel) []string { return propVariants[pm.cur].cands[m.name] }

func (pm *propMachine) modelConfigured(m *propModel) bool {
	_, ok := propVariants[pm.cur].cands[m.name]
	return ok
}

// held counts the model's held leases (all, long) on provider p.
func (pm *propMachine) held(p propProv) (all, long int) {
	for _, l := range pm.leases {
		if l.state == leaseHeld && l.l.ProviderID == p.name && l.l.NodeID == p.node {
			all++
			if l.l.Long {
				long++
			}
		}
	}
	return all, long
}

func (pm *propMachine) fits(p propProv, long bool) bool {
	if !pm.live(p) || !p.referenced {
		return false
	}
	all, lg := pm.held(p)
	return all < p.cap && (!long || lg < p.long)
}

func (pm *propMachine) queued(pred func(*propOp) bool) []*propOp {
	var out []*propOp
	for _, op := range pm.ops {
		if op.state == opUnresolved && pred(op) {
			out = append(out, op)
		}
	}
	return out
}

// settle waits until every Acquire goroutine has either returned (its
// result is taken in) or sits in the queue: then, per model, the
// dispatcher's pending count equals the number of unresolved operations.
// Grants only happen inside the synchronous calls the actions make (no
// queue timeout fires within a run), so a settled state stays settled.
func (pm *propMachine) settle(rt *rapid.T) {
	deadline := time.Now().Add(waitDeadline)
	spins := 0
	for {
		for drained := false; !drained; {
			select {
			case r := <-pm.results:
				pm.onResult(rt, r)
			default:
				drained = true
			}
		}
		st := pm.d.Status()
		ok := true
		for i := range propModels {
			m := &propModels[i]
			want := len(pm.queued(func(op *propOp) bool { return op.model.name == m.name }))
			if !pm.modelConfigured(m) && want == 0 {
				want = -1 // not listed
			}
			if pendingOf(st, m.name) != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("dispatcher did not settle: %+v", st.Models)
		}
		if spins++; spins < 50 {
			runtime.Gosched()
			continue
		}
		select {
		case r := <-pm.results:
			pm.onResult(rt, r)
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// await takes results in until op has one.
func (pm *propMachine) await(rt *rapid.T, op *propOp) {
	timeout := time.After(waitDeadline)
	for op.state == opUnresolved {
		select {
		case r := <-pm.results:
			pm.onResult(rt, r)
		case <-timeout:
			rt.Fatalf("op %d: no result", op.id)
		}
	}
}

func (pm *propMachine) onResult(rt *rapid.T, r propResult) {
	op := pm.ops[r.id]
	if op.state != opUnresolved {
		rt.Fatalf("op %d: second result", op.id)
	}
	if r.err != nil {
		op.state, op.err = opFailed, r.err
		switch {
		case errors.Is(r.err, ErrQueueFull):
			if op.expect != "full" {
				rt.Fatalf("op %d: unexpected queue full (expected %s)", op.id, op.expect)
			}
		case errors.Is(r.err, context.Canceled):
			if !op.cancelled {
				rt.Fatalf("op %d: cancelled without a cancel", op.id)
			}
		case errors.Is(r.err, ErrModelNotFound):
			if op.expect != "notfound" && !op.removed {
				rt.Fatalf("op %d: unexpected model not found (expected %s)", op.id, op.expect)
			}
		default:
			rt.Fatalf("op %d: %v", op.id, r.err)
		}
		return
	}
	l := r.l
	if op.expect == "full" || op.cancelled {
		rt.Fatalf("op %d (expect %s, cancelled %v) got a lease", op.id, op.expect, op.cancelled)
	}
	if l.Long != op.long || l.Model != op.model.name {
		rt.Fatalf("op %d: lease long=%v model=%s", op.id, l.Long, l.Model)
	}
	p := provByName(l.ProviderID)
	isCand := false
	for _, c := range pm.cands(op.model) {
		isCand = isCand || c == p.name
	}
	if !isCand || p.node != l.NodeID || !pm.live(p) || l.Target != "target-"+p.name {
		rt.Fatalf("op %d: lease on %s/%s (live %v), not a live candidate of %s", op.id, l.NodeID, l.ProviderID, pm.live(p), op.model.name)
	}
	op.state = opHeld
	op.lease = &propLease{l: l}
	pm.leases = append(pm.leases, op.lease)
}

func (pm *propMachine) acquire(rt *rapid.T) {
	m := &propModels[rapid.IntRange(0, len(propModels)-1).Draw(rt, "model")]
	wantLong := rapid.Bool().Draw(rt, "long")
	tokens := 1
	if wantLong {
		tokens = 1000
	}
	long := m.long > 0 && tokens >= m.long
	op := &propOp{id: len(pm.ops), model: m, long: long}
	// Predict: the least loaded fitting candidate (ties: configured order);
	// else queue full; else queued.
	var best *propProv
	bestLoad := 0.0
	for _, c := range pm.cands(m) {
		p := provByName(c)
		if !pm.fits(p, long) {
			continue
		}
		all, _ := pm.held(p)
		if load := float64(all) / float64(p.cap); best == nil || load < bestLoad {
			best, bestLoad = &p, load
		}
	}
	switch {
	case !pm.modelConfigured(m):
		op.expect = "notfound"
	case best != nil:
		op.expect, op.predicted = "grant", best.name
	case len(pm.queued(func(o *propOp) bool { return o.model == m })) >= m.maxQueue:
		op.expect = "full"
	default:
		op.expect = "queue"
	}
	var ctx context.Context
	ctx, op.cancel = context.WithCancel(context.Background())
	pm.ops = append(pm.ops, op)
	pm.wg.Add(1)
	go func() {
		defer pm.wg.Done()
		l, err := pm.d.Acquire(ctx, Request{Model: m.name, PromptTokens: tokens})
		pm.results <- propResult{op.id, l, err}
	}()
	pm.settle(rt)
	switch op.expect {
	case "grant":
		if op.state != opHeld || op.lease.l.ProviderID != op.predicted {
			rt.Fatalf("op %d: want a lease on %s now, got state %d err %v", op.id, op.predicted, op.state, op.err)
		}
	case "queue":
		if op.state != opUnresolved {
			rt.Fatalf("op %d: want queued, got state %d err %v", op.id, op.state, op.err)
		}
	case "full", "notfound":
		if op.state != opFailed {
			rt.Fatalf("op %d: want %s, got state %d", op.id, op.expect, op.state)
		}
	}
}

func (pm *propMachine) release(rt *rapid.T) {
	var held []*propLease
	for _, l := range pm.leases {
		if l.state == leaseHeld {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		rt.Skip("no held lease")
	}
	l := held[rapid.IntRange(0, len(held)-1).Draw(rt, "lease")]
	reason := rapid.SampledFrom([]ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError, ReasonNodeLost}).Draw(rt, "reason")
	waiting := pm.queued(func(*propOp) bool { return true })
	l.state, l.reason = leaseReleased, reason
	// The freed slot goes to the oldest queued request (ops arrive in id
	// order) that lists the provider and fits it now, and to nobody else.
	p := provByName(l.l.ProviderID)
	var next *propOp
	for _, op := range waiting {
		if slices.Contains(pm.cands(op.model), p.name) && pm.fits(p, op.long) {
			next = op
			break
		}
	}
	if !l.l.Release(reason) {
		rt.Fatalf("Release of a held lease returned false")
	}
	if l.l.Release(ReasonError) {
		rt.Fatalf("second Release returned true")
	}
	pm.settle(rt)
	for _, op := range waiting {
		switch {
		case op == next:
			if op.state != opHeld || op.lease.l.ProviderID != p.name {
				rt.Fatalf("op %d (oldest fitting waiter of %s): state %d err %v, want a lease on %s", op.id, p.name, op.state, op.err, p.name)
			}
		case op.state != opUnresolved:
			rt.Fatalf("op %d resolved (state %d) by a release whose slot was op %v's", op.id, op.state, next)
		}
	}
}

// releaseStale releases a lease that is already back (by its holder or by
// fencing): always a no-op.
func (pm *propMachine) releaseStale(rt *rapid.T) {
	var back []*propLease
	for _, l := range pm.leases {
		if l.state != leaseHeld {
			back = append(back, l)
		}
	}
	if len(back) == 0 {
		rt.Skip("no returned lease")
	}
	l := back[rapid.IntRange(0, len(back)-1).Draw(rt, "lease")]
	if l.l.Release(ReasonCompleted) {
		rt.Fatalf("Release of a returned lease returned true")
	}
	pm.settle(rt)
}

func (pm *propMachine) cancelQueued(rt *rapid.T) {
	q := pm.queued(func(*propOp) bool { return true })
	if len(q) == 0 {
		rt.Skip("nothing queued")
	}
	op := q[rapid.IntRange(0, len(q)-1).Draw(rt, "op")]
	op.cancelled = true
	op.cancel()
	// The waiter leaves the queue in its own goroutine: wait for its answer
	// (settle alone could see the state from before the cancel).
	pm.await(rt, op)
	pm.settle(rt)
	if op.state != opFailed || !errors.Is(op.err, context.Canceled) {
		rt.Fatalf("cancelled op %d: state %d err %v", op.id, op.state, op.err)
	}
}

// cancelHeld cancels the context of an Acquire that already returned a
// lease: nothing changes.
func (pm *propMachine) cancelHeld(rt *rapid.T) {
	var ops []*propOp
	for _, op := range pm.ops {
		if op.state == opHeld && !op.cancelled {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		rt.Skip("no held op")
	}
	op := ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]
	op.cancelled = true
	op.cancel()
	pm.settle(rt)
}

func (pm *propMachine) pickNode(rt *rapid.T, states ...nodeState) *propNode {
	var ns []*propNode
	for _, n := range pm.nodes {
		for _, s := range states {
			if n.state == s {
				ns = append(ns, n)
			}
		}
	}
	if len(ns) == 0 {
		rt.Skip("no node in that state")
	}
	return ns[rapid.IntRange(0, len(ns)-1).Draw(rt, "node")]
}

// nodeLost: the ready owner's connection closes; its leases are fenced.
func (pm *propMachine) nodeLost(rt *rapid.T) {
	n := pm.pickNode(rt, stateReady)
	pm.d.Closed(n.conn, errors.New("lost"))
	for _, l := range pm.leases {
		if l.state == leaseHeld && l.l.NodeID == n.id {
			l.state, l.reason = leaseFenced, ReasonNodeLost
		}
	}
	pm.stale = append(pm.stale, n.conn)
	n.state, n.conn = stateOffline, nil
	pm.settle(rt)
}

// nodeRegister: a new connection registers an offline or pending node (a
// pending owner is superseded without being closed). A ready node is not
// superseded here: that closes the old connection, which needs a real one
// (TestSupersedeReadyOwnerOverWire covers it).
func (pm *propMachine) nodeRegister(rt *rapid.T) {
	n := pm.pickNode(rt, stateOffline, statePending)
	c := new(nodewire.Conn)
	if resp := pm.d.Register(c, regReq(n.id, testToken)); !resp.GetAccepted() {
		rt.Fatalf("register %s rejected: %v", n.id, resp)
	}
	if n.conn != nil {
		pm.stale = append(pm.stale, n.conn)
	}
	n.state, n.conn, n.running = statePending, c, pm.cur
	pm.settle(rt)
}

func (pm *propMachine) nodeReady(rt *rapid.T) {
	n := pm.pickNode(rt, statePending)
	if resp := pm.d.Ready(n.conn, &iop.NodeReadyRequest{NodeId: n.id}); !resp.GetReady() {
		rt.Fatalf("ready %s refused: %s", n.id, resp.GetReason())
	}
	pm.d.Activate(n.conn)
	n.state = stateReady
	pm.settle(rt)
}

// nodeRegisterReady: a new generation in one go.
func (pm *propMachine) nodeRegisterReady(rt *rapid.T) {
	pm.nodeRegister(rt)
	for _, n := range pm.nodes {
		if n.state == statePending {
			if resp := pm.d.Ready(n.conn, &iop.NodeReadyRequest{NodeId: n.id}); !resp.GetReady() {
				rt.Fatalf("ready %s refused: %s", n.id, resp.GetReason())
			}
			pm.d.Activate(n.conn)
			n.state = stateReady
		}
	}
	pm.settle(rt)
}

func (pm *propMachine) closePending(rt *rapid.T) {
	n := pm.pickNode(rt, statePending)
	pm.d.Closed(n.conn, nil)
	pm.stale = append(pm.stale, n.conn)
	n.state, n.conn = stateOffline, nil
	pm.settle(rt)
}

// staleCallbacks: ready and closed from a superseded or closed connection
// change nothing.
func (pm *propMachine) staleCallbacks(rt *rapid.T) {
	if len(pm.stale) == 0 {
		rt.Skip("no stale connection")
	}
	c := pm.stale[rapid.IntRange(0, len(pm.stale)-1).Draw(rt, "conn")]
	id := rapid.SampledFrom([]string{"A", "B"}).Draw(rt, "id")
	if resp := pm.d.Ready(c, &iop.NodeReadyRequest{NodeId: id}); resp.GetReady() || resp.GetReason() == "" {
		rt.Fatalf("stale ready answered %v", resp)
	}
	pm.d.Closed(c, nil)
	pm.settle(rt)
}

// reload switches the edge to another config variant mid-lease and
// mid-wait: leases on a provider it drops return once (node_lost), waiters
// of a model it drops fail with ErrModelNotFound, waiters of models that
// remain keep their place; a provider it restores is live again when its
// node's session runs it, and its free slots go to waiters at once.
func (pm *propMachine) reload(rt *rapid.T) {
	next := rapid.IntRange(0, len(propVariants)-1).Draw(rt, "variant")
	for _, l := range pm.leases {
		if l.state == leaseHeld && !pm.configured(l.l.ProviderID, next) {
			l.state, l.reason = leaseFenced, ReasonNodeLost
		}
	}
	var removed []*propOp
	for _, op := range pm.queued(func(op *propOp) bool { _, ok := propVariants[next].cands[op.model.name]; return !ok }) {
		op.removed = true
		removed = append(removed, op)
	}
	pm.d.Reload(propEdgeCfg(rt, propVariants[next]))
	pm.cur = next
	for _, op := range removed {
		pm.await(rt, op)
		if !errors.Is(op.err, ErrModelNotFound) {
			rt.Fatalf("op %d of a removed model: state %d err %v", op.id, op.state, op.err)
		}
	}
	pm.settle(rt)
}

// refreshApplied: a ready node answers a refresh of the edge's current
// config APPLIED (RefreshNode's outcome, without the wire).
func (pm *propMachine) refreshApplied(rt *rapid.T) {
	n := pm.pickNode(rt, stateReady)
	pm.d.applied(n.id, n.conn, pm.d.Config().Node(n.id), nil)
	n.running = pm.cur
	pm.settle(rt)
}

// check is the invariant, run after every action.
func (pm *propMachine) check(rt *rapid.T) {
	st := pm.d.Status()
	for _, n := range pm.nodes {
		if ns := nodeOf(st, n.id); ns == nil || ns.Connected != (n.state == stateReady) {
			rt.Fatalf("node %s: status %+v, model state %s", n.id, ns, n.state)
		}
	}
	for _, p := range propProvs {
		ps := provOf(st, p.node, p.name)
		if !pm.configured(p.name, pm.cur) {
			if ps != nil {
				rt.Fatalf("provider %s dropped from the config is listed: %+v", p.name, *ps)
			}
			continue
		}
		if !pm.live(p) {
			assertOffline(rt, ps)
			continue
		}
		all, long := pm.held(p)
		var q, lq int32
		for _, op := range pm.queued(func(*propOp) bool { return true }) {
			for _, c := range pm.cands(op.model) {
				if c == p.name {
					q++
					if op.long {
						lq++
					}
				}
			}
		}
		wantStatus := "available"
		if !p.referenced {
			wantStatus = "disabled"
		}
		want := ProviderStatus{NodeId: p.node, ProviderId: p.name, Type: "mock", Category: "api", Status: wantStatus, Health: "ok",
			Capacity: int32(p.cap), LongCapacity: int32(p.long), InFlight: int32(all), LongInFlight: int32(long), Queued: q, LongQueued: lq,
			ConfiguredCapacity: int32(p.cap), ConfiguredLongCapacity: int32(p.long), Waiting: q}
		if *ps != want {
			rt.Fatalf("provider %s/%s:\n got %+v\nwant %+v", p.node, p.name, *ps, want)
		}
		if ps.InFlight > ps.Capacity || ps.LongInFlight > ps.LongCapacity {
			rt.Fatalf("provider %s over capacity: %+v", p.name, *ps)
		}
	}
	// Pumping: no queued request waits while a live candidate has room.
	for _, op := range pm.queued(func(*propOp) bool { return true }) {
		for _, c := range pm.cands(op.model) {
			if pm.fits(provByName(c), op.long) {
				rt.Fatalf("op %d (%s long=%v) waits while %s has room", op.id, op.model.name, op.long, c)
			}
		}
	}
	// Exactly-once release: the lease's own view and the counters.
	releasedBy := map[ReleaseReason]float64{}
	for _, l := range pm.leases {
		rel, why := l.l.Released()
		switch l.state {
		case leaseHeld:
			if rel {
				rt.Fatalf("held lease on %s released (%s)", l.l.ProviderID, why)
			}
		default:
			if !rel || why != l.reason {
				rt.Fatalf("lease on %s: released %v reason %q, want %q", l.l.ProviderID, rel, why, l.reason)
			}
			releasedBy[l.reason]++
		}
	}
	if got := metricValue(rt, pm.reg, "iop_lease_acquired_total", nil); got != float64(len(pm.leases)) {
		rt.Fatalf("acquired counter %v, leases granted %d", got, len(pm.leases))
	}
	for _, r := range []ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError, ReasonNodeLost} {
		if got := metricValue(rt, pm.reg, "iop_lease_released_total", map[string]string{"reason": string(r)}); got != releasedBy[r] {
			rt.Fatalf("released{%s} counter %v, want %v", r, got, releasedBy[r])
		}
	}
}

func TestPoolProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pm := newPropMachine(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"acquire":           pm.acquire,
			"acquire2":          pm.acquire, // acquires weigh double
			"release":           pm.release,
			"releaseStale":      pm.releaseStale,
			"cancelQueued":      pm.cancelQueued,
			"cancelHeld":        pm.cancelHeld,
			"nodeLost":          pm.nodeLost,
			"nodeRegister":      pm.nodeRegister,
			"nodeReady":         pm.nodeReady,
			"nodeRegisterReady": pm.nodeRegisterReady,
			"closePending":      pm.closePending,
			"staleCallbacks":    pm.staleCallbacks,
			"reload":            pm.reload,
			"refreshApplied":    pm.refreshApplied,
			"":                  pm.check,
		})
	})
}
