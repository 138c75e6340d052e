package dispatch

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The pinned-waiter property test drives model m over pa (node A, one
// slot) and pb (node B, two slots) with random follow-ups of responses
// pa or pb answered, of random priorities, long or not, ordinary requests, requests
// whose deadline has passed, releases, cancellations (one racing the
// grant of the slot a release frees), node losses, drains, reconnects and
// reloads that take a provider from the model and give it back
// (pinprop37q_test.go), and keeps its own account of which waiter is
// pinned where. After every step: a waiter pinned to a provider is
// granted only that provider until the provider stops being servable,
// then any; a freed slot goes to the first waiter (priority, then
// arrival) that may use it; no waiter waits beside a slot it may use; no
// lease is lost (in-flight counts and the acquired counter match); the
// pending, queued and waiting figures and the lists of pinned waiters
// match the model's (checkFigures). At the end the dispatcher is closed
// (every waiter fails, nothing is left counted), or every node comes back
// and every lease is released: every waiter must then be granted.

const pinPropMaxQueue = 5

var pinPropCaps = map[string]int{"pa": 1, "pb": 2}

// pinPropLongCaps are the providers' long slots, and pinPropLong the
// model's long_context_tokens (a long op's prompt).
var pinPropLongCaps = map[string]int{"pa": 1, "pb": 1}

const pinPropLong = 1000

type pinPropOp struct {
	id     int
	pin    string // the provider the op waits for ("": any)
	prio   int    // Request.Priority
	long   bool   // a long request (pinPropLong tokens)
	cancel context.CancelFunc
	done   bool
	lease  *Lease
	err    error
}

type pinPropNode struct {
	id, prov string
	conn     *nodewire.Conn // nil: offline
	draining bool
	down     bool // its backend reported offline (a session's health)
}

type pinProp struct {
	f       *fixture
	variant int // pinPropVariants' entry the dispatcher runs
	nodes   []*pinPropNode
	ops     []*pinPropOp
	held    map[string][]*Lease // by provider, leases the model holds
	granted int
	results chan propResult
}

func newPinProp(rt *rapid.T) *pinProp {
	cfg := pinPropCfg(rt, 0)
	pp := &pinProp{held: map[string][]*Lease{}, results: make(chan propResult, 256)}
	pp.f = &fixture{t: nil, reg: prometheus.NewRegistry()}
	pp.f.d = New(cfg, Options{Bus: dropBus{}, Metrics: NewMetrics(pp.f.reg)})
	if err := pp.f.reg.Register(NewStatusCollector(pp.f.d)); err != nil {
		rt.Fatalf("register the status collector: %v", err)
	}
	pp.nodes = []*pinPropNode{{id: "A", prov: "pa"}, {id: "B", prov: "pb"}}
	rt.Cleanup(func() {
		for _, op := range pp.ops {
			op.cancel()
		}
		pp.f.d.Close()
		pp.f.wg.Wait()
	})
	for _, n := range pp.nodes {
		pp.up(rt, n)
	}
	pp.f.d.mu.Lock()
	pp.f.d.responses.put("resp_pa", resKey{"A", "pa"})
	pp.f.d.responses.put("resp_pb", resKey{"B", "pb"})
	pp.f.d.mu.Unlock()
	return pp
}

func (pp *pinProp) node(prov string) *pinPropNode {
	for _, n := range pp.nodes {
		if n.prov == prov {
			return n
		}
	}
	return nil
}

func (pp *pinProp) servable(prov string) bool {
	n := pp.node(prov)
	return n.conn != nil && !n.draining && !n.down && pp.cand(prov)
}

// room reports whether prov has a slot for a request, long or not, now.
func (pp *pinProp) room(prov string, long bool) bool {
	return pp.servable(prov) && len(pp.held[prov]) < pinPropCaps[prov] && (!long || pp.longHeld(prov) < pinPropLongCaps[prov])
}

// longHeld is how many of the leases held on prov are long.
func (pp *pinProp) longHeld(prov string) int {
	n := 0
	for _, l := range pp.held[prov] {
		if l.Long {
			n++
		}
	}
	return n
}

// queued is the waiting ops in the order they are served: by priority,
// then arrival (the ops arrive in id order, and far less than one
// priority step, see pinPropPrios, apart).
func (pp *pinProp) queued() []*pinPropOp {
	var q []*pinPropOp
	for _, op := range pp.ops {
		if !op.done {
			q = append(q, op)
		}
	}
	slices.SortStableFunc(q, func(a, b *pinPropOp) int { return cmp.Compare(b.prio, a.prio) })
	return q
}

// uses reports whether op may be granted prov now.
func (op *pinPropOp) uses(prov string) bool { return op.pin == "" || op.pin == prov }

// pumpExpect is who prov's free slots go to: the first waiters that may
// use it, one per slot (a long one only while a long slot is free too).
func (pp *pinProp) pumpExpect(prov string) map[*pinPropOp]string {
	out := map[*pinPropOp]string{}
	free := pinPropCaps[prov] - len(pp.held[prov])
	freeLong := pinPropLongCaps[prov] - pp.longHeld(prov)
	if !pp.servable(prov) {
		return out
	}
	for _, op := range pp.queued() {
		if free == 0 {
			break
		}
		if op.long && freeLong == 0 {
			continue
		}
		if op.uses(prov) {
			out[op] = prov
			free--
			if op.long {
				freeLong--
			}
		}
	}
	return out
}

// take receives results until every op of want is settled, checks each
// got its provider, and that nobody else was settled.
func (pp *pinProp) take(rt *rapid.T, want map[*pinPropOp]string) {
	deadline := time.After(waitDeadline)
	for {
		left := 0
		for op := range want {
			if !op.done {
				left++
			}
		}
		if left == 0 {
			break
		}
		select {
		case r := <-pp.results:
			pp.settle(rt, r, want)
		case <-deadline:
			rt.Fatalf("no result within %s for %d expected grants", waitDeadline, left)
		}
	}
	waitFor(rt, "queue as expected", func() bool { return pendingOf(pp.f.d.Status(), "m") == len(pp.queued()) })
	select {
	case r := <-pp.results:
		rt.Fatalf("op %d settled unexpectedly: lease %v, err %v", r.id, r.l != nil, r.err)
	default:
	}
}

func (pp *pinProp) settle(rt *rapid.T, r propResult, want map[*pinPropOp]string) {
	op := pp.ops[r.id]
	prov, ok := want[op]
	if !ok || op.done {
		rt.Fatalf("op %d (pin %q) settled unexpectedly: lease %v, err %v", op.id, op.pin, r.l != nil, r.err)
	}
	op.done, op.lease, op.err = true, r.l, r.err
	switch {
	case prov == "timeout":
		if !errors.Is(r.err, ErrQueueTimeout) {
			rt.Fatalf("op %d: %v, want a queue timeout", op.id, r.err)
		}
	case prov == "cancelled":
		if !errors.Is(r.err, context.Canceled) {
			rt.Fatalf("op %d: %v, want cancelled", op.id, r.err)
		}
	case prov == "shutdown":
		if !errors.Is(r.err, ErrDispatcherShutdown) {
			rt.Fatalf("op %d: %v, want shutdown", op.id, r.err)
		}
	case prov == "full":
		if !errors.Is(r.err, ErrQueueFull) {
			rt.Fatalf("op %d: %v, want queue full", op.id, r.err)
		}
	case r.err != nil:
		rt.Fatalf("op %d (pin %q): %v, want a lease on %s", op.id, op.pin, r.err, prov)
	case prov != "any" && r.l.ProviderID != prov, !op.uses(r.l.ProviderID), !pp.room(r.l.ProviderID, op.long), r.l.Long != op.long:
		rt.Fatalf("op %d (pin %q): lease on %s, want %s", op.id, op.pin, r.l.ProviderID, prov)
	default:
		pp.held[r.l.ProviderID] = append(pp.held[r.l.ProviderID], r.l)
		pp.granted++
	}
}

func (pp *pinProp) acquire(rt *rapid.T) {
	pin := rapid.SampledFrom([]string{"", "pa", "pb"}).Draw(rt, "pin")
	expired := rapid.IntRange(0, 4).Draw(rt, "expired") == 0
	prio := rapid.SampledFrom(pinPropPrios).Draw(rt, "prio")
	long := rapid.IntRange(0, 2).Draw(rt, "long") == 0
	req := Request{Model: "m", Priority: prio}
	if long {
		req.PromptTokens = pinPropLong
	}
	op := &pinPropOp{id: len(pp.ops), prio: prio, long: long}
	if pin != "" {
		req.PreviousResponseID = "resp_" + pin
		if pp.servable(pin) {
			op.pin = pin // else routed as if it named none
		}
	}
	if expired {
		req.Deadline = time.Now().Add(-time.Second)
	}
	want := map[*pinPropOp]string{}
	switch {
	case op.pin != "" && pp.room(op.pin, op.long):
		want[op] = op.pin
	case op.pin == "" && (pp.room("pa", op.long) || pp.room("pb", op.long)):
		want[op] = "any"
	case len(pp.queued()) >= pinPropMaxQueue:
		want[op] = "full"
	case expired:
		want[op] = "timeout"
	}
	var ctx context.Context
	ctx, op.cancel = context.WithCancel(context.Background())
	pp.ops = append(pp.ops, op)
	pp.f.wg.Add(1)
	// Owner: the test. Stops when Acquire returns (Cleanup cancels it).
	go func() {
		defer pp.f.wg.Done()
		l, err := pp.f.d.Acquire(ctx, req)
		pp.results <- propResult{op.id, l, err}
	}()
	if len(want) == 0 {
		waitFor(rt, "op queued", func() bool { return pendingOf(pp.f.d.Status(), "m") == len(pp.queued()) })
	}
	pp.take(rt, want)
}

func (pp *pinProp) release(rt *rapid.T) {
	prov := rapid.SampledFrom([]string{"pa", "pb"}).Draw(rt, "prov")
	if len(pp.held[prov]) == 0 {
		rt.Skip("nothing held there")
	}
	i := rapid.IntRange(0, len(pp.held[prov])-1).Draw(rt, "lease")
	l := pp.held[prov][i]
	pp.held[prov] = append(pp.held[prov][:i], pp.held[prov][i+1:]...)
	want := pp.pumpExpect(prov)
	l.Release(ReasonCompleted)
	pp.take(rt, want)
}

func (pp *pinProp) cancelQueued(rt *rapid.T) {
	q := pp.queued()
	if len(q) == 0 {
		rt.Skip("nothing queued")
	}
	op := q[rapid.IntRange(0, len(q)-1).Draw(rt, "op")]
	op.cancel()
	pp.take(rt, map[*pinPropOp]string{op: "cancelled"})
}

// pumpExpectAll is pumpExpect of every node's provider in turn, each
// waiter served by the first that would take it.
func (pp *pinProp) pumpExpectAll() map[*pinPropOp]string {
	want := map[*pinPropOp]string{}
	for _, n := range pp.nodes {
		for op, p := range pp.pumpExpect(n.prov) {
			if _, dup := want[op]; !dup {
				want[op] = p
			}
		}
	}
	return want
}

// gone makes n's provider unservable: pinned waiters become ordinary and
// the other provider's free slots serve them.
func (pp *pinProp) gone(rt *rapid.T, n *pinPropNode, act func()) {
	for _, op := range pp.queued() {
		if op.pin == n.prov {
			op.pin = ""
		}
	}
	act()
	pp.take(rt, pp.pumpExpectAll())
}

func (pp *pinProp) nodeLost(rt *rapid.T) {
	n := pp.nodes[rapid.IntRange(0, 1).Draw(rt, "node")]
	if n.conn == nil {
		rt.Skip("offline")
	}
	pp.gone(rt, n, func() {
		pp.f.d.Closed(n.conn, errors.New("lost"))
		n.conn, n.draining = nil, false
		pp.held[n.prov] = nil // fenced
	})
}

func (pp *pinProp) drain(rt *rapid.T) {
	n := pp.nodes[rapid.IntRange(0, 1).Draw(rt, "node")]
	if n.conn == nil || n.draining {
		rt.Skip("offline or draining")
	}
	pp.gone(rt, n, func() {
		n.draining = true
		pp.f.d.Load(n.conn, drainingReport(n.prov))
	})
}

// up starts a new session of n (offline, or draining: its drain ends with
// its session).
func (pp *pinProp) up(rt *rapid.T, n *pinPropNode) {
	if n.conn != nil {
		pp.f.d.Closed(n.conn, errors.New("restart"))
		pp.held[n.prov] = nil
	}
	c := new(nodewire.Conn)
	if resp := pp.f.d.Register(c, regReq(n.id, testToken)); !resp.GetAccepted() {
		rt.Fatalf("register %s: %v", n.id, resp)
	}
	if resp := pp.f.d.Ready(c, &iop.NodeReadyRequest{NodeId: n.id}); !resp.GetReady() {
		rt.Fatalf("ready %s: %s", n.id, resp.GetReason())
	}
	n.conn, n.draining, n.down = c, false, false
	want := pp.pumpExpect(n.prov)
	pp.f.d.Activate(c)
	pp.take(rt, want)
}

func (pp *pinProp) nodeUp(rt *rapid.T) {
	n := pp.nodes[rapid.IntRange(0, 1).Draw(rt, "node")]
	if n.conn != nil && !n.draining && !n.down {
		rt.Skip("serving")
	}
	pp.up(rt, n)
}

func (pp *pinProp) check(rt *rapid.T) {
	st := pp.f.d.Status()
	for _, n := range pp.nodes {
		ps := provOf(st, n.id, n.prov)
		if n.conn != nil && (int(ps.InFlight) != len(pp.held[n.prov]) || int(ps.LongInFlight) != pp.longHeld(n.prov)) {
			rt.Fatalf("%s in flight %d (%d long), want %d (%d)", n.prov, ps.InFlight, ps.LongInFlight, len(pp.held[n.prov]), pp.longHeld(n.prov))
		}
		for _, op := range pp.queued() {
			if pp.room(n.prov, op.long) {
				if op.uses(n.prov) {
					rt.Fatalf("op %d (pin %q) waits while %s has room", op.id, op.pin, n.prov)
				}
			}
		}
	}
	if got := metricValue(rt, pp.f.reg, "iop_lease_acquired_total", nil); got != float64(pp.granted) {
		rt.Fatalf("acquired counter %v, leases granted %d", got, pp.granted)
	}
	pp.checkFigures(rt)
}

func TestPinnedWaiterProperties37b(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pp := newPinProp(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"acquire":      pp.acquire,
			"acquire2":     pp.acquire, // acquires weigh double
			"release":      pp.release,
			"cancelQueued": pp.cancelQueued,
			"nodeLost":     pp.nodeLost,
			"drain":        pp.drain,
			"nodeUp":       pp.nodeUp,
			"reload":       pp.reload,
			"backendDown":  pp.backendDown,
			"backendUp":    pp.backendUp,
			"cancelRace":   pp.cancelRace,
			"":             pp.check,
		})
		if rapid.Bool().Draw(rt, "close") {
			pp.closeAll(rt)
			return
		}
		// Every node back, every lease released: every waiter is served.
		for _, n := range pp.nodes {
			if n.conn == nil || n.draining || n.down {
				pp.up(rt, n)
			}
		}
		for range 4*len(pp.ops) + 1 {
			if len(pp.queued()) == 0 {
				return
			}
			for _, prov := range []string{"pa", "pb"} {
				if len(pp.held[prov]) > 0 {
					l := pp.held[prov][0]
					pp.held[prov] = pp.held[prov][1:]
					want := pp.pumpExpect(prov)
					l.Release(ReasonCompleted)
					pp.take(rt, want)
				}
			}
		}
		rt.Fatalf("%d waiters never served", len(pp.queued()))
	})
}
