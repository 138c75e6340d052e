package nodeagent

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// drainEdge is a real edge dispatcher (node n1 with mock provider "m" of
// capacity 1, model "mm" on it) behind a loopback nodewire server, with
// hooks at its handshake steps and a record of what the node said.
type drainEdge struct {
	d    *dispatch.Dispatcher
	addr string
	// onRegister and onReady, when set, run after the dispatcher has
	// answered the registration / before it answers the ready request.
	onRegister, onReady func()

	mu        sync.Mutex
	readyReqs []*iop.NodeReadyRequest // guarded by mu
	reports   []*iop.LoadReport       // guarded by mu: in arrival order

	// activated gets the edge's status right after each activation.
	activated chan dispatch.Status
}

// startDrainEdge serves the edge; loadEverySec is the node's
// load_report_interval_sec (0: no reports).
func startDrainEdge(t *testing.T, loadEverySec float64) *drainEdge {
	t.Helper()
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "n1", Token: "tok", LoadReportIntervalSec: &loadEverySec,
			Providers: []config.ProviderSpec{{Name: "m", Type: "mock", Capacity: 1}}}},
		Models: []config.ModelSpec{{Name: "mm", Providers: []config.ModelProvider{{Node: "n1", Provider: "m", Target: "t"}}}},
	}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	e := &drainEdge{d: dispatch.New(cfg, dispatch.Options{}), activated: make(chan dispatch.Status, 8)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	srv := nodewire.NewServer(nodewire.ServerConfig{Handler: e, HandshakeTimeout: 5 * time.Second})
	done := make(chan struct{})
	// Owner: the test; stops at srv.Close in Cleanup.
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done; e.d.Close() })
	return e
}

func (e *drainEdge) Register(c *nodewire.Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
	resp := e.d.Register(c, req)
	if e.onRegister != nil {
		e.onRegister()
	}
	return resp
}

func (e *drainEdge) Ready(c *nodewire.Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse {
	e.mu.Lock()
	e.readyReqs = append(e.readyReqs, req)
	e.mu.Unlock()
	if e.onReady != nil {
		e.onReady()
	}
	return e.d.Ready(c, req)
}

func (e *drainEdge) Activate(c *nodewire.Conn) {
	e.d.Activate(c)
	e.activated <- e.d.Status()
}

func (e *drainEdge) Closed(c *nodewire.Conn, err error) { e.d.Closed(c, err) }

func (e *drainEdge) Load(c *nodewire.Conn, r *iop.LoadReport) {
	e.mu.Lock()
	e.reports = append(e.reports, r)
	e.mu.Unlock()
	e.d.Load(c, r)
}

func (e *drainEdge) firstReady(t *testing.T) *iop.NodeReadyRequest {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.readyReqs) == 0 {
		t.Fatal("no ready request")
	}
	return e.readyReqs[0]
}

func (e *drainEdge) firstReport() *iop.LoadReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.reports) == 0 {
		return nil
	}
	return e.reports[0]
}

// nextActivation waits for the edge's status right after an activation.
func (e *drainEdge) nextActivation(t *testing.T) dispatch.Status {
	t.Helper()
	select {
	case st := <-e.activated:
		return st
	case <-time.After(30 * time.Second):
		t.Fatal("the node never went live")
		return dispatch.Status{}
	}
}

// drainEdgeProvider is n1/m in st.
func drainEdgeProvider(t *testing.T, st dispatch.Status) *dispatch.ProviderStatus {
	t.Helper()
	for _, n := range st.Nodes {
		for _, p := range n.Providers {
			if n.ID == "n1" && p.ProviderId == "m" {
				return p
			}
		}
	}
	t.Fatal("n1/m not in the status")
	return nil
}

func drainEdgePending(st dispatch.Status) int {
	for _, m := range st.Models {
		if m.Name == "mm" {
			return m.Pending
		}
	}
	return -1
}

// runDrainSupervisor runs a supervisor for agent against addr until the
// test ends.
func runDrainSupervisor(t *testing.T, addr string, agent *Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sup := NewSupervisor(SupervisorConfig{Dial: nodewire.DialConfig{Address: addr, HandshakeTimeout: 5 * time.Second},
		NodeID: "n1", Token: "tok", Interval: 10 * time.Millisecond}, agent, nil)
	// Owner: the test; stops at cancel in Cleanup.
	go func() { defer close(done); _ = sup.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A drain that begins while the node is connecting (after its
// registration was answered, before its ready request) is said in the
// ready request: the edge makes the provider live draining, so a request
// already waiting for it is never handed the free slot, and the status
// shows draining from the first moment.
func TestDrainBegunWhileConnectingGetsNoWork(t *testing.T) {
	e := startDrainEdge(t, 60)
	agent := newTestAgent(t)
	e.onRegister = func() {
		if err := agent.Drain(context.Background()); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	granted := make(chan *dispatch.Lease, 1)
	acquired := make(chan struct{})
	// Owner: the test; ends when ctx is cancelled (or a lease is granted).
	go func() {
		defer close(acquired)
		if l, err := e.d.Acquire(ctx, dispatch.Request{Model: "mm"}); err == nil {
			granted <- l
			l.Release(dispatch.ReasonCompleted)
		}
	}()
	defer func() { cancel(); <-acquired }()
	deadline := time.Now().Add(30 * time.Second)
	for drainEdgePending(e.d.Status()) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the request never queued")
		}
		time.Sleep(time.Millisecond)
	}

	runDrainSupervisor(t, e.addr, agent)
	st := e.nextActivation(t)
	if !e.firstReady(t).GetDraining() {
		t.Fatal("the ready request of a draining node did not say it drains")
	}
	if p := drainEdgeProvider(t, st); p.Health != "draining" || p.Status != "draining" || p.InFlight != 0 {
		t.Fatalf("n1/m at activation = health %q status %q in_flight %d, want draining, draining, 0", p.Health, p.Status, p.InFlight)
	}
	if got := drainEdgePending(st); got != 1 {
		t.Fatalf("pending at activation = %d, want 1 (nothing granted on the draining node)", got)
	}
	// The node's drain reports come and change nothing.
	for e.firstReport() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no load report from the draining node")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case l := <-granted:
		t.Fatalf("a request was granted on %s/%s, a draining node", l.NodeID, l.ProviderID)
	default:
	}
	if p := drainEdgeProvider(t, e.d.Status()); p.Health != "draining" || p.InFlight != 0 {
		t.Fatalf("n1/m after the node's report = %q in_flight %d, want draining, 0", p.Health, p.InFlight)
	}
}

// A drain that begins just after the ready request went out (it said
// nothing of it) is told by the session's very first load report, even
// with load reports off: the edge hears of it as soon as the session is
// live, not a report interval later.
func TestDrainBegunAfterReadySentIsTheFirstReport(t *testing.T) {
	for _, every := range []float64{0, 60} {
		e := startDrainEdge(t, every)
		agent := newTestAgent(t)
		e.onReady = func() {
			if err := agent.Drain(context.Background()); err != nil {
				t.Error(err)
			}
		}
		runDrainSupervisor(t, e.addr, agent)
		if p := drainEdgeProvider(t, e.nextActivation(t)); p.Health == "draining" {
			t.Fatalf("reports every %vs: n1/m draining at activation, though the ready said nothing of it", every)
		}
		if e.firstReady(t).GetDraining() {
			t.Fatalf("reports every %vs: the ready request said draining before the drain began", every)
		}
		deadline := time.Now().Add(30 * time.Second)
		for drainEdgeProvider(t, e.d.Status()).Health != "draining" {
			if time.Now().After(deadline) {
				t.Fatalf("reports every %vs: the edge never heard of the drain", every)
			}
			time.Sleep(time.Millisecond)
		}
		r := e.firstReport()
		if r == nil || len(r.GetProviders()) != 1 || r.GetProviders()[0].GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING {
			t.Fatalf("reports every %vs: the session's first report = %v, want m draining", every, r)
		}
	}
}
