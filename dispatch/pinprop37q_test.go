package dispatch

import (
	"context"
	"errors"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The pinned-waiter property test's further operations: reloads that take
// a provider from the model's candidates and give it back, priorities, a
// waiter cancelled while a release hands it the slot, a backend reported
// down and back, and the figures the status and the dispatcher's own
// lists give after every step.

// pinPropVariants are the model's candidate lists a reload switches
// between: a provider a variant leaves out is listed by no model
// (unreferenced), so it is never dispatched to, and waiters pinned to it
// are unpinned.
var pinPropVariants = [][]string{{"A/pa", "B/pb"}, {"B/pb"}, {"A/pa"}}

// pinPropPrios are the priorities ops draw: far enough apart that no
// run's arrivals (seconds at most) outweigh one level (PriorityStep × 100),
// so the model may order by priority, then arrival.
var pinPropPrios = []int{-100, 0, 0, 100}

// pinPropCfg is the edge config of variant v: node A's pa (one slot), node
// B's pb (two), one long slot each, model m over v's candidates, without the no-provider fast
// path (a run's offline node must not turn waiting into ErrNoProvider).
func pinPropCfg(t tb, v int) *config.Edge {
	cfg := buildCfg(t, []tNode{{id: "A", provs: []tProv{{name: "pa", cap: 1, long: 1}}}, {id: "B", provs: []tProv{{name: "pb", cap: 2, long: 1}}}},
		[]tModel{{name: "m", timeout: 600, maxQueue: pinPropMaxQueue, long: pinPropLong, cands: pinPropVariants[v]}})
	zero := 0.0
	cfg.Models[0].OfflineGraceSec = &zero
	return cfg
}

// cand reports whether prov is a candidate of m in the current variant.
func (pp *pinProp) cand(prov string) bool {
	return slices.Contains(pinPropVariants[pp.variant], pp.node(prov).id+"/"+prov)
}

// reload switches to another variant: waiters pinned to a provider it
// drops wait for any candidate, and a provider it adds (or the one left to
// the unpinned) serves the oldest waiters at once.
func (pp *pinProp) reload(rt *rapid.T) {
	v := rapid.IntRange(0, len(pinPropVariants)-1).Draw(rt, "variant")
	if v == pp.variant {
		rt.Skip("same variant")
	}
	pp.variant = v
	for _, op := range pp.queued() {
		if op.pin != "" && !pp.cand(op.pin) {
			op.pin = ""
		}
	}
	pp.f.d.Reload(pinPropCfg(rt, v))
	// At most one provider has room for a waiter now: one with room
	// before the reload had no waiter that could use it, and a provider
	// the reload drops takes none.
	pp.take(rt, pp.pumpExpectAll())
}

// cancelRace releases a lease while the waiter its slot goes to is
// cancelled: the waiter either keeps the lease (it was handed over before
// it gave up) or is cancelled, and then the slot goes to the next waiter
// as if it had never queued, whether it was granted and gave the lease
// back or was dropped first. Either way nothing is lost or granted twice.
func (pp *pinProp) cancelRace(rt *rapid.T) {
	prov := rapid.SampledFrom([]string{"pa", "pb"}).Draw(rt, "prov")
	if len(pp.held[prov]) == 0 {
		rt.Skip("nothing held there")
	}
	l := pp.held[prov][0]
	pp.held[prov] = pp.held[prov][1:]
	var target *pinPropOp
	for op := range pp.pumpExpect(prov) {
		target = op // one at most: the slot this release frees
	}
	if target == nil {
		pp.held[prov] = append(pp.held[prov], l)
		rt.Skip("nobody waits for the slot")
	}
	cancelled := metricValue(rt, pp.f.reg, "iop_lease_released_total", released(pp.node(prov).id, prov, ReasonCancelled))
	done := make(chan struct{})
	pp.f.wg.Add(1)
	// Owner: the test. Ends when Release returns (it only takes d.mu).
	go func() {
		defer pp.f.wg.Done()
		defer close(done)
		l.Release(ReasonCompleted)
	}()
	target.cancel()
	select {
	case <-done:
	case <-time.After(waitDeadline):
		rt.Fatalf("release did not return within %s", waitDeadline)
	}
	// The target's result first; others the give-back's pump settles
	// (the next waiter) may come before it.
	var early []propResult
	deadline := time.After(waitDeadline)
	for !target.done {
		select {
		case r := <-pp.results:
			if r.id != target.id {
				early = append(early, r)
				continue
			}
			switch {
			case r.err == nil && r.l != nil && r.l.ProviderID == prov:
				target.done, target.lease = true, r.l
				pp.held[prov] = append(pp.held[prov], r.l)
				pp.granted++
			case errors.Is(r.err, context.Canceled):
				target.done, target.err = true, r.err
			default:
				rt.Fatalf("op %d (pin %q): lease %v, err %v; want a lease on %s or cancelled", target.id, target.pin, r.l != nil, r.err, prov)
			}
		case <-deadline:
			rt.Fatalf("op %d not settled within %s", target.id, waitDeadline)
		}
	}
	want := map[*pinPropOp]string{}
	if target.lease == nil {
		// Granted and given back (counted acquired), or dropped before:
		// the slot is the next waiter's either way.
		back := metricValue(rt, pp.f.reg, "iop_lease_released_total", released(pp.node(prov).id, prov, ReasonCancelled)) - cancelled
		pp.granted += int(back)
		want = pp.pumpExpect(prov)
	}
	for _, r := range early {
		pp.settle(rt, r, want)
	}
	pp.take(rt, want)
}

// checkFigures compares the dispatcher's figures with the model's after
// every step: the model's pending count, each provider's queued, long
// queued and waiting figures (a pinned waiter counts against its provider only, an
// ordinary one against every candidate), and the lists of pinned waiters
// (one per provider with waiters pinned to it, each of a provider that
// can still serve them, none empty).
func (pp *pinProp) checkFigures(rt *rapid.T) {
	q := pp.queued()
	st := pp.f.d.Status()
	if got := pendingOf(st, "m"); got != len(q) {
		rt.Fatalf("pending %d, want %d", got, len(q))
	}
	if got := metricValue(rt, pp.f.reg, "iop_queue_pending", map[string]string{"model": "m"}); got != float64(len(q)) {
		rt.Fatalf("iop_queue_pending %v, want %d", got, len(q))
	}
	for _, n := range pp.nodes {
		waiting, long := 0, 0
		for _, op := range q {
			if op.pin == n.prov || (op.pin == "" && pp.cand(n.prov)) {
				waiting++
				if op.long {
					long++
				}
			}
		}
		queued, longQueued := 0, 0
		if n.conn != nil {
			queued, longQueued = waiting, long
		}
		ps := provOf(st, n.id, n.prov)
		if int(ps.Queued) != queued || int(ps.LongQueued) != longQueued || int(ps.Waiting) != waiting {
			rt.Fatalf("%s queued %d (%d long) waiting %d, want %d (%d) and %d", n.prov, ps.Queued, ps.LongQueued, ps.Waiting, queued, longQueued, waiting)
		}
		if got := metricValue(rt, pp.f.reg, "iop_provider_queued", map[string]string{"node": n.id, "provider": n.prov}); got != float64(queued) {
			rt.Fatalf("iop_provider_queued of %s %v, want %d", n.prov, got, queued)
		}
		pinned := 0
		for _, op := range q {
			if op.pin == n.prov {
				pinned++
			}
		}
		if got := pp.pinnedLen(n); got != pinned {
			rt.Fatalf("%d waiters pinned to %s, want %d", got, n.prov, pinned)
		}
	}
	d := pp.f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.models["m"]
	total := 0
	for _, l := range m.queues {
		total += l.Len()
	}
	for k, l := range m.pinned {
		if l.Len() == 0 || !d.pinHoldsLocked(m, k.res, kindLong(k.kind), kindTunnel(k.kind)) {
			rt.Fatalf("list pinned to %v (%d waiters) kept", k.res.key, l.Len())
		}
		total += l.Len()
	}
	if total != m.pending {
		rt.Fatalf("%d waiters listed, pending %d", total, m.pending)
	}
}

// pinnedLen is how many waiters the dispatcher has pinned to n's provider.
func (pp *pinProp) pinnedLen(n *pinPropNode) int {
	d := pp.f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	out := 0
	for k, l := range d.models["m"].pinned {
		if k.res.key == (resKey{n.id, n.prov}) {
			out += l.Len()
		}
	}
	return out
}

// closeAll closes the dispatcher: every waiter, pinned or not, fails with
// ErrDispatcherShutdown, and no count or list is left behind.
func (pp *pinProp) closeAll(rt *rapid.T) {
	want := map[*pinPropOp]string{}
	for _, op := range pp.queued() {
		want[op] = "shutdown"
	}
	pp.f.d.Close()
	pp.take(rt, want)
	pp.f.d.mu.Lock()
	defer pp.f.d.mu.Unlock()
	if m := pp.f.d.models["m"]; m.pending != 0 || len(m.pinned) != 0 {
		rt.Fatalf("after Close: pending %d, %d pinned lists", m.pending, len(m.pinned))
	}
}

// backendDown: a health report says n's backend is down; its pinned
// waiters wait for any candidate.
func (pp *pinProp) backendDown(rt *rapid.T) {
	n := pp.nodes[rapid.IntRange(0, 1).Draw(rt, "node")]
	if n.conn == nil || n.down {
		rt.Skip("offline or down")
	}
	pp.gone(rt, n, func() {
		n.down = true
		pp.f.d.setHealth(n.id, n.conn, []*iop.ProviderSnapshot{{ProviderId: n.prov, Health: iop.HealthState_HEALTH_STATE_OFFLINE}})
	})
}

// backendUp: a health report says n's backend is back: its free slots go
// to the first waiters at once (unless its node drains: a drain outlasts
// the backend's health).
func (pp *pinProp) backendUp(rt *rapid.T) {
	n := pp.nodes[rapid.IntRange(0, 1).Draw(rt, "node")]
	if n.conn == nil || !n.down {
		rt.Skip("offline or not down")
	}
	n.down = false
	want := pp.pumpExpect(n.prov)
	pp.f.d.setHealth(n.id, n.conn, []*iop.ProviderSnapshot{{ProviderId: n.prov, Health: iop.HealthState_HEALTH_STATE_OK}})
	pp.take(rt, want)
}
