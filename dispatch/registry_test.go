package dispatch

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// oneNodeCfg: node n1 with provider p (capacity cap), model m on it, and a
// second configured node n2 so "unknown node" is distinct from "other node".
func oneNodeCfg(t tb, cap int) []tNode {
	return []tNode{{id: "n1", provs: []tProv{{name: "p", cap: cap}}}, {id: "n2", provs: []tProv{{name: "q", cap: 1}}}}
}

var oneNodeModels = []tModel{{name: "m", cands: []string{"n1/p"}}, {name: "m2", cands: []string{"n2/q"}}}

// lifecycleStep is one handler call on a named connection identity.
type lifecycleStep struct {
	op      string // register | ready | closed
	conn    string
	node    string // default n1
	token   string // default testToken
	version uint32 // default nodewire.ProtocolVersion
	// register: want accepted, or the reject code.
	wantCode iop.RejectCode
	// ready: want the answer.
	wantReady bool
}

func TestLifecycleTransitions(t *testing.T) {
	reg := func(conn string) lifecycleStep { return lifecycleStep{op: "register", conn: conn} }
	ready := func(conn string, want bool) lifecycleStep {
		return lifecycleStep{op: "ready", conn: conn, wantReady: want}
	}
	closed := func(conn string) lifecycleStep { return lifecycleStep{op: "closed", conn: conn} }
	cases := []struct {
		name          string
		steps         []lifecycleStep
		wantConnected bool
		wantEvents    []string
		wantSessions  map[string]float64 // iop_node_sessions_total{node=n1} by outcome
	}{
		{
			name:  "accepted registration is only pending",
			steps: []lifecycleStep{reg("a")},
		},
		{
			name:          "ready from the pending owner",
			steps:         []lifecycleStep{reg("a"), ready("a", true)},
			wantConnected: true, wantEvents: []string{EventNodeConnected},
			wantSessions: map[string]float64{"ready": 1},
		},
		{
			name:          "duplicate ready from the ready owner is true without re-activation",
			steps:         []lifecycleStep{reg("a"), ready("a", true), ready("a", true), ready("a", true)},
			wantConnected: true, wantEvents: []string{EventNodeConnected},
			wantSessions: map[string]float64{"ready": 1},
		},
		{
			name:          "ready from a superseded pending connection is refused",
			steps:         []lifecycleStep{reg("a"), reg("b"), ready("a", false), ready("b", true)},
			wantConnected: true, wantEvents: []string{EventNodeSuperseded, EventNodeConnected},
			wantSessions: map[string]float64{"superseded": 1, "ready": 1},
		},
		{
			name:  "ready from an unknown connection is refused",
			steps: []lifecycleStep{ready("z", false), reg("a"), ready("z", false)},
		},
		{
			name:  "ready naming another node id is refused",
			steps: []lifecycleStep{reg("a"), {op: "ready", conn: "a", node: "n2"}},
		},
		{
			name:  "closed pending owner emits no event and cannot become ready",
			steps: []lifecycleStep{reg("a"), closed("a"), ready("a", false)},
		},
		{
			name:          "closed ready owner fences and disconnects",
			steps:         []lifecycleStep{reg("a"), ready("a", true), closed("a")},
			wantEvents:    []string{EventNodeConnected, EventNodeDisconnected},
			wantSessions:  map[string]float64{"ready": 1, "lost": 1},
			wantConnected: false,
		},
		{
			name:          "closed of a superseded pending connection is inert",
			steps:         []lifecycleStep{reg("a"), reg("b"), closed("a"), ready("b", true)},
			wantConnected: true, wantEvents: []string{EventNodeSuperseded, EventNodeConnected},
			wantSessions: map[string]float64{"superseded": 1, "ready": 1},
		},
		{
			name:          "closed of an unknown connection is inert",
			steps:         []lifecycleStep{reg("a"), ready("a", true), closed("z")},
			wantConnected: true, wantEvents: []string{EventNodeConnected},
			wantSessions: map[string]float64{"ready": 1},
		},
		{
			name:          "a new generation after a loss",
			steps:         []lifecycleStep{reg("a"), ready("a", true), closed("a"), reg("b"), ready("a", false), ready("b", true), closed("a")},
			wantConnected: true,
			wantEvents:    []string{EventNodeConnected, EventNodeDisconnected, EventNodeConnected},
			wantSessions:  map[string]float64{"ready": 2, "lost": 1},
		},
		{
			name: "wrong token is rejected and leaves the ready owner alone",
			steps: []lifecycleStep{reg("a"), ready("a", true),
				{op: "register", conn: "b", token: "wrong", wantCode: iop.RejectCode_REJECT_CODE_CREDENTIALS},
				{op: "register", conn: "c", token: "", wantCode: iop.RejectCode_REJECT_CODE_CREDENTIALS},
				ready("b", false), closed("b"), closed("c")},
			wantConnected: true, wantEvents: []string{EventNodeConnected},
			wantSessions: map[string]float64{"ready": 1, "rejected": 2},
		},
		{
			name: "another node's token is rejected",
			steps: []lifecycleStep{{op: "register", conn: "a", token: "other-token", wantCode: iop.RejectCode_REJECT_CODE_CREDENTIALS},
				ready("a", false)},
			wantSessions: map[string]float64{"rejected": 1},
		},
		{
			name: "unknown node is rejected",
			steps: []lifecycleStep{{op: "register", conn: "a", node: "nope", wantCode: iop.RejectCode_REJECT_CODE_UNKNOWN_NODE},
				{op: "ready", conn: "a", node: "nope"}, {op: "closed", conn: "a"}},
		},
		{
			name: "wrong protocol version is rejected before anything else",
			steps: []lifecycleStep{reg("a"), ready("a", true),
				{op: "register", conn: "b", version: nodewire.ProtocolVersion + 1, wantCode: iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION},
				{op: "register", conn: "c", node: "nope", version: 99, wantCode: iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION},
				closed("b")},
			wantConnected: true, wantEvents: []string{EventNodeConnected},
			wantSessions: map[string]float64{"ready": 1, "rejected": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
			conns := map[string]*nodewire.Conn{}
			conn := func(name string) *nodewire.Conn {
				if conns[name] == nil {
					conns[name] = new(nodewire.Conn)
				}
				return conns[name]
			}
			var lastGen uint64
			for i, s := range tc.steps {
				node := s.node
				if node == "" {
					node = "n1"
				}
				switch s.op {
				case "register":
					req := regReq(node, testToken)
					if s.token != "" || s.wantCode == iop.RejectCode_REJECT_CODE_CREDENTIALS {
						req.Token = s.token
					}
					if s.version != 0 {
						req.ProtocolVersion = s.version
					}
					resp := f.d.Register(conn(s.conn), req)
					if resp.GetProtocolVersion() != nodewire.ProtocolVersion {
						t.Fatalf("step %d: response protocol version %d", i, resp.GetProtocolVersion())
					}
					if s.wantCode != iop.RejectCode_REJECT_CODE_UNSPECIFIED {
						if resp.GetAccepted() || resp.GetRejectCode() != s.wantCode || resp.GetReason() == "" {
							t.Fatalf("step %d: register = accepted %v code %v reason %q, want reject %v", i, resp.GetAccepted(), resp.GetRejectCode(), resp.GetReason(), s.wantCode)
						}
						if resp.GetConfig() != nil {
							t.Fatalf("step %d: a rejection carries a config payload", i)
						}
						continue
					}
					if !resp.GetAccepted() || resp.GetNodeId() != node || resp.GetConfig() == nil {
						t.Fatalf("step %d: register = %v", i, resp)
					}
					// Every accepted registration is a new, larger generation.
					f.d.mu.Lock()
					gen := f.d.nodes[node].gen
					f.d.mu.Unlock()
					if gen <= lastGen {
						t.Fatalf("step %d: generation %d not above %d", i, gen, lastGen)
					}
					lastGen = gen
				case "ready":
					resp := f.d.Ready(conn(s.conn), &iop.NodeReadyRequest{NodeId: node})
					if resp.GetReady() {
						f.d.Activate(conn(s.conn)) // as the server does once the answer is written
					}
					if resp.GetReady() != s.wantReady {
						t.Fatalf("step %d: ready = %v (%q), want %v", i, resp.GetReady(), resp.GetReason(), s.wantReady)
					}
					if !resp.GetReady() && resp.GetReason() == "" {
						t.Fatalf("step %d: refused ready without a reason", i)
					}
				case "closed":
					f.d.Closed(conn(s.conn), nil)
				}
			}
			st := f.d.Status()
			n1 := nodeOf(st, "n1")
			if n1.Connected != tc.wantConnected {
				t.Fatalf("connected = %v, want %v", n1.Connected, tc.wantConnected)
			}
			p := provOf(st, "n1", "p")
			if tc.wantConnected {
				if want := (ProviderStatus{NodeId: "n1", ProviderId: "p", Type: "mock", Category: "api", Status: "available", Health: "ok", Capacity: 2, LongCapacity: 2, ConfiguredCapacity: 2, ConfiguredLongCapacity: 2}); *p != want {
					t.Fatalf("provider = %+v, want %+v", *p, want)
				}
			} else {
				assertOffline(t, p)
			}
			if f.d.Dispatchable() != tc.wantConnected {
				t.Fatalf("Dispatchable = %v", f.d.Dispatchable())
			}
			// Refused registrations have their own event (tested in
			// TestRejectedRegistrationEvent); the lifecycle is the rest.
			lifecycle := slices.DeleteFunc(f.bus.types(), func(typ string) bool { return typ == EventNodeRejected })
			if !slices.Equal(lifecycle, tc.wantEvents) {
				t.Fatalf("events = %v, want %v", lifecycle, tc.wantEvents)
			}
			var ring []string
			for _, e := range f.d.RecentEvents() {
				if e.Type == EventNodeRejected {
					continue
				}
				ring = append(ring, e.Type)
				if e.NodeID != "n1" || e.Time.IsZero() {
					t.Fatalf("event %+v", e)
				}
			}
			if !slices.Equal(ring, tc.wantEvents) {
				t.Fatalf("recent events = %v, want %v", ring, tc.wantEvents)
			}
			for _, outcome := range []string{"ready", "rejected", "superseded", "lost"} {
				got := metricValue(t, f.reg, "iop_node_sessions_total", map[string]string{"node": "n1", "outcome": outcome})
				if got != tc.wantSessions[outcome] {
					t.Fatalf("iop_node_sessions_total{outcome=%s} = %v, want %v", outcome, got, tc.wantSessions[outcome])
				}
			}
			// The other node never moved.
			if nodeOf(st, "n2").Connected {
				t.Fatal("n2 connected")
			}
		})
	}
}

// assertOffline: a disconnected or pending node's provider stays listed
// with status unavailable, health offline and every figure 0.
func assertOffline(t tb, p *ProviderStatus) {
	t.Helper()
	if p == nil {
		t.Fatalf("provider not listed")
	}
	// Every live figure is 0; the configured capacity and the waiting
	// requests stay visible.
	want := ProviderStatus{NodeId: p.NodeId, ProviderId: p.ProviderId, Type: p.Type, Category: p.Category, Status: "unavailable", Health: "offline",
		ConfiguredCapacity: p.ConfiguredCapacity, ConfiguredLongCapacity: p.ConfiguredLongCapacity, Waiting: p.Waiting}
	if p.ConfiguredCapacity <= 0 {
		t.Fatalf("offline provider hides its configured capacity: %+v", *p)
	}
	if *p != want {
		t.Fatalf("offline provider = %+v, want %+v", *p, want)
	}
}

// A pending node is listed but not dispatchable; Acquire waits; the ready
// transition activates the resources and serves the waiters queued while
// pending in that same step.
func TestPendingThenReadyServesWaiters(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	c := f.register("n1")
	st := f.d.Status()
	if nodeOf(st, "n1").Connected {
		t.Fatal("pending node shows connected")
	}
	assertOffline(t, provOf(st, "n1", "p"))
	if f.d.Dispatchable() {
		t.Fatal("dispatchable while pending")
	}

	ctx := context.Background()
	w1 := f.enqueue(ctx, Request{Model: "m"})
	w2 := f.enqueue(ctx, Request{Model: "m"})
	w3 := f.enqueue(ctx, Request{Model: "m"})
	st = f.d.Status()
	if pendingOf(st, "m") != 3 {
		t.Fatalf("pending = %d", pendingOf(st, "m"))
	}
	// Queued figures are per live candidate: a pending node shows 0.
	assertOffline(t, provOf(st, "n1", "p"))
	if got := metricValue(t, f.reg, "iop_lease_acquired_total", nil); got != 0 {
		t.Fatalf("leases granted while pending: %v", got)
	}

	f.ready(c, "n1")
	// The two oldest waiters were granted in the ready step itself.
	st = f.d.Status()
	if p := provOf(st, "n1", "p"); p.InFlight != 2 || p.Queued != 1 || p.Status != "available" {
		t.Fatalf("after ready: %+v", *p)
	}
	if pendingOf(st, "m") != 1 {
		t.Fatalf("pending after ready = %d", pendingOf(st, "m"))
	}
	l1, l2 := recvLease(t, w1), recvLease(t, w2)
	for _, l := range []*Lease{l1, l2} {
		if l.NodeID != "n1" || l.ProviderID != "p" || l.Target != "target-p" || l.Model != "m" {
			t.Fatalf("lease %+v", l)
		}
	}
	if !l1.Release(ReasonCompleted) {
		t.Fatal("release")
	}
	l3 := recvLease(t, w3)
	l2.Release(ReasonCompleted)
	l3.Release(ReasonCompleted)
	if p := provOf(f.d.Status(), "n1", "p"); p.InFlight != 0 || p.Queued != 0 {
		t.Fatalf("after releases: %+v", *p)
	}
}

// A duplicate ready from the ready owner answers true and changes nothing:
// leases stay held and counted, the queue is untouched, no second
// node.connected event.
func TestDuplicateReadyKeepsLeases(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	c := f.up("n1")
	l1 := mustAcquire(t, f.d, Request{Model: "m"})
	l2 := mustAcquire(t, f.d, Request{Model: "m"})
	w := f.enqueue(context.Background(), Request{Model: "m"})
	before := f.d.Status()
	for range 3 {
		f.ready(c, "n1")
	}
	if after := f.d.Status(); !reflect.DeepEqual(before, after) {
		t.Fatalf("status changed by duplicate ready:\n%+v\n%+v", before, after)
	}
	for _, l := range []*Lease{l1, l2} {
		if rel, _ := l.Released(); rel {
			t.Fatal("lease released by duplicate ready")
		}
	}
	if got := f.bus.types(); !slices.Equal(got, []string{EventNodeConnected}) {
		t.Fatalf("events = %v", got)
	}
	if got := metricValue(t, f.reg, "iop_lease_acquired_total", nil); got != 2 {
		t.Fatalf("acquired = %v", got)
	}
	if got := metricValue(t, f.reg, "iop_lease_released_total", nil); got != 0 {
		t.Fatalf("released = %v", got)
	}
	// Capacity is still enforced: the waiter gets the first freed slot.
	if !l1.Release(ReasonCompleted) {
		t.Fatal("release")
	}
	l3 := recvLease(t, w)
	l2.Release(ReasonCompleted)
	l3.Release(ReasonCompleted)
}

// Closing the ready owner fences its generation: every lease returns with
// node_lost exactly once, later Release calls are no-ops, a second Closed is
// inert, and waiters keep waiting for a new generation, which serves them.
func TestClosedReadyOwnerFencesOnce(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	c := f.up("n1")
	c2 := f.up("n2")
	la := mustAcquire(t, f.d, Request{Model: "m"})
	lb := mustAcquire(t, f.d, Request{Model: "m"})
	lq := mustAcquire(t, f.d, Request{Model: "m2"}) // on n2: untouched by n1's loss
	w := f.enqueue(context.Background(), Request{Model: "m"})

	f.d.Closed(c, nil)
	for _, l := range []*Lease{la, lb} {
		if rel, why := l.Released(); !rel || why != ReasonNodeLost {
			t.Fatalf("lease after loss: released %v reason %q", rel, why)
		}
		if l.Release(ReasonCompleted) {
			t.Fatal("Release after fencing reported releasing")
		}
		if _, why := l.Released(); why != ReasonNodeLost {
			t.Fatalf("reason overwritten: %q", why)
		}
	}
	if rel, _ := lq.Released(); rel {
		t.Fatal("other node's lease released")
	}
	check := func() {
		t.Helper()
		if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", ReasonNodeLost)); got != 2 {
			t.Fatalf("node_lost releases = %v, want 2", got)
		}
		if got := metricValue(t, f.reg, "iop_lease_released_total", nil); got != 2 {
			t.Fatalf("all releases = %v, want 2", got)
		}
		if got := f.bus.types(); !slices.Equal(got, []string{EventNodeConnected, EventNodeConnected, EventNodeDisconnected}) {
			t.Fatalf("events = %v", got)
		}
		st := f.d.Status()
		assertOffline(t, provOf(st, "n1", "p"))
		if nodeOf(st, "n1").Connected || pendingOf(st, "m") != 1 {
			t.Fatalf("status after loss: %+v", st)
		}
	}
	check()
	// nodewire calls Closed once per connection; a repeat must still be inert.
	f.d.Closed(c, nil)
	check()
	// A ready from the fenced connection is refused.
	if resp := f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "n1"}); resp.GetReady() {
		t.Fatal("fenced connection became ready again")
	}
	check()

	// The new generation starts empty and serves the waiter.
	f.up("n1")
	l := recvLease(t, w)
	if p := provOf(f.d.Status(), "n1", "p"); p.InFlight != 1 || p.Capacity != 2 {
		t.Fatalf("new generation: %+v", *p)
	}
	if !l.Release(ReasonCompleted) || !lq.Release(ReasonError) {
		t.Fatal("release")
	}
	if got := metricValue(t, f.reg, "iop_lease_released_total", released("n2", "q", ReasonError)); got != 1 {
		t.Fatalf("n2 error releases = %v", got)
	}
	_ = c2
}

// busScenario drives one lifecycle-and-lease scenario and returns what it
// observed: every Status snapshot and every lifecycle/lease answer.
func busScenario(t *testing.T, bus Bus) (snaps []Status, outcomes []any) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), bus)
	snap := func() { snaps = append(snaps, f.d.Status()) }
	note := func(v ...any) { outcomes = append(outcomes, v) }
	readyOf := func(c *nodewire.Conn) bool {
		ok := f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "n1"}).GetReady()
		if ok {
			f.d.Activate(c)
		}
		return ok
	}
	ctx := context.Background()

	a := f.register("n1")
	snap()
	w1 := f.enqueue(ctx, Request{Model: "m", SessionID: "s"})
	snap()
	note(readyOf(a))
	l1 := recvLease(t, w1)
	l2 := mustAcquire(t, f.d, Request{Model: "m"})
	w3 := f.enqueue(ctx, Request{Model: "m"})
	snap()
	note(readyOf(a), readyOf(new(nodewire.Conn)))
	snap()
	f.d.Closed(a, nil)
	snap()
	note(l1.Released())
	note(l2.Released())
	note(l1.Release(ReasonCompleted))
	f.d.Closed(a, nil)
	b := f.register("n1")
	note(readyOf(a))
	snap()
	note(readyOf(b), readyOf(b))
	l3 := recvLease(t, w3)
	snap()
	note(f.d.Register(new(nodewire.Conn), regReq("n1", "bad")).GetRejectCode())
	note(l3.Release(ReasonCancelled), l3.Release(ReasonError))
	note(l3.Released())
	snap()
	l4 := mustAcquire(t, f.d, Request{Model: "m", SessionID: "s"})
	f.d.Closed(b, nil)
	note(l4.Released())
	snap()
	for _, reason := range []ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError, ReasonNodeLost} {
		note(metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", reason)))
	}
	note(metricValue(t, f.reg, "iop_lease_acquired_total", nil))
	var ring []string
	for _, e := range f.d.RecentEvents() {
		ring = append(ring, e.Type)
	}
	note(ring)
	return snaps, outcomes
}

// Events are informational: a bus that drops every event changes no
// lifecycle, lease or queue outcome.
func TestDroppingBusChangesNoOutcome(t *testing.T) {
	rec := &recBus{}
	wantSnaps, wantOut := busScenario(t, rec)
	if got := rec.types(); !slices.Equal(got, []string{EventNodeConnected, EventNodeDisconnected, EventNodeConnected, EventNodeRejected, EventNodeDisconnected}) {
		t.Fatalf("recorded events = %v", got)
	}
	// The scenario's answers themselves (independent of the bus).
	const want = "[[true] [true false] [true node_lost] [true node_lost] [false] [false] [true true] [REJECT_CODE_CREDENTIALS] [true false] [true cancelled] [true node_lost] [0] [1] [0] [3] [4] [[node.connected node.disconnected node.connected node.rejected node.disconnected]]]"
	if got := fmt.Sprint(wantOut); got != want {
		t.Fatalf("outcomes:\n got %s\nwant %s", got, want)
	}
	full := NewChanBus(0) // no room at all: drops every event
	for name, bus := range map[string]Bus{"drop": dropBus{}, "chanbus-0": full} {
		snaps, out := busScenario(t, bus)
		if !reflect.DeepEqual(snaps, wantSnaps) {
			t.Fatalf("%s: status snapshots differ:\n got %+v\nwant %+v", name, snaps, wantSnaps)
		}
		if !reflect.DeepEqual(out, wantOut) {
			t.Fatalf("%s: outcomes differ:\n got %v\nwant %v", name, out, wantOut)
		}
	}
	if full.Dropped() != 5 {
		t.Fatalf("chan bus dropped %d events, want 5", full.Dropped())
	}
}

// A refused registration is an event with its reason; it names the node
// only when the id is configured, and never carries the token.
func TestRejectedRegistrationEvent(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	f.d.Register(new(nodewire.Conn), regReq("n1", "wrong-secret"))
	f.d.Register(new(nodewire.Conn), regReq("intruder-<script>", testToken))
	ev := f.d.RecentEvents()
	if len(ev) != 2 {
		t.Fatalf("events %+v", ev)
	}
	if ev[0].Type != EventNodeRejected || ev[0].NodeID != "n1" || ev[0].Reason != "invalid node token" {
		t.Fatalf("wrong token: %+v", ev[0])
	}
	if ev[1].Type != EventNodeRejected || ev[1].NodeID != "" || ev[1].Reason != "unknown node id" {
		t.Fatalf("unknown id: %+v", ev[1])
	}
}
