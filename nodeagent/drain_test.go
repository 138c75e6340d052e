package nodeagent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// heldInstance is a mock instance whose Run sends one delta, then waits
// for release (or its context) before it completes.
type heldInstance struct {
	adapter.Instance
	runs    *atomic.Int64
	started chan struct{}
	release chan struct{}
}

func (h heldInstance) Run(ctx context.Context, _ *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	h.runs.Add(1)
	if err := sink.Delta("first"); err != nil {
		return nil, err
	}
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := sink.Delta(" last"); err != nil {
		return nil, err
	}
	return &adapter.Result{FinishReason: "stop"}, nil
}

// heldAgent is an agent whose "held" instances are heldInstances.
func heldAgent(t *testing.T, h heldInstance) *Agent {
	a := NewAgent(map[string]adapter.Factory{"held": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		cfg = &iop.AdapterConfig{Name: cfg.GetName(), Type: "mock", Capacity: cfg.GetCapacity()}
		in, err := mock.New(cfg, env)
		h.Instance = in
		return h, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	return a
}

// heldRunning is h's agent serving a load edge of heldPayload, its first
// load report in, and run r1 started on adapter h (h holds it).
func heldRunning(t *testing.T, h heldInstance) (le *loadEdge, a *Agent, c *nodewire.Conn, st *nodewire.Stream) {
	t.Helper()
	le = startLoadEdge(t, heldPayload())
	a = heldAgent(t, h)
	c = startNode(t, le.fakeEdge, a)
	waitLoads(t, le, 1, 10*time.Second) // the session's first report
	st = openRun(t, c, "r1")
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never started")
	}
	return le, a, c, st
}

func heldPayload() *iop.NodeConfigPayload {
	return &iop.NodeConfigPayload{
		Adapters: []*iop.AdapterConfig{{Name: "h", Type: "held", Capacity: 4}, {Name: "g", Type: "held", Capacity: 4}},
		// Reports a minute apart: the draining one must not wait for the next.
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 30000},
		Runtime:   &iop.NodeRuntimeConfig{LoadReportIntervalMs: 60000},
	}
}

// openRun sends a streamed run request for adapter h on a new stream of c.
func openRun(t *testing.T, c *nodewire.Conn, id string) *nodewire.Stream {
	t.Helper()
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: id, Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput("hi"),
	}}}); err != nil {
		t.Fatal(err)
	}
	return st
}

// Drain takes no new work and waits for the work in flight: the edge
// hears at once (not at the next report a minute later) that every
// provider drains, a run and a tunnel that arrive during the drain are
// refused with CAPACITY_EXCEEDED without reaching the adapter, the run in
// flight finishes whole, and Drain returns once its stream has ended.
func TestDrainFinishesRunsAndRefusesNewWork(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	le, a, c, st := heldRunning(t, h)
	drained := make(chan error, 1)
	// Owner: the test; Drain returns once r1 has ended (or its bound).
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drained <- a.Drain(ctx)
	}()
	r := waitLoads(t, le, 1, 10*time.Second)[0]
	if len(r.GetProviders()) != 2 {
		t.Fatalf("draining report: %v", r)
	}
	for _, p := range r.GetProviders() {
		if p.GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING {
			t.Fatalf("draining report: %v", r)
		}
	}
	if snaps := a.Snapshots(context.Background()); snaps[0].GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING || snaps[0].GetStatus() != "draining" {
		t.Fatalf("snapshot during the drain: %v", snaps[0])
	}

	refused := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r2", Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("hi"),
	}}})
	if ev := terminal(refused); len(refused) != 1 || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED {
		t.Fatalf("run during the drain: %v", refused)
	}
	tun := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "t1", Adapter: "g", Method: "POST", Path: "/v1/chat/completions",
	}}})
	if len(tun) != 1 || tun[0].GetProviderTunnelFrame().GetError().GetCode() != iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED {
		t.Fatalf("tunnel during the drain: %v", tun)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the adapter ran %d times; the refused run reached it", n)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) with a run in flight", err)
	default:
	}

	close(h.release)
	envs := readAll(t, st)
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("the run in flight ended with %v", envs)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return once the run in flight ended")
	}
}

// A run that does not end holds Drain only up to its context: Drain
// returns the context's error at the bound, the run still going.
func TestDrainBoundedByContext(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	defer close(h.release)
	le := startLoadEdge(t, heldPayload())
	a := heldAgent(t, h)
	c := startNode(t, le.fakeEdge, a)
	st := openRun(t, c, "r1")
	defer func() { _ = st.CloseWrite() }()
	<-h.started
	const bound = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	if err := a.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with a run that does not end: %v", err)
	}
	if took := time.Since(start); took < bound || took > bound+5*time.Second {
		t.Fatalf("Drain returned after %s, bound %s", took, bound)
	}
	// Idle, a second Drain returns at once.
	b := heldAgent(t, h)
	if err := b.Drain(context.Background()); err != nil || !b.Draining() {
		t.Fatalf("idle drain: %v", err)
	}
}

// With load reports off, a draining node still reports that it drains, at
// once and then every drainReportEvery: a session that reconnects during
// the drain may send its first report before the edge takes reports from
// it, and the next must come soon.
func TestDrainReportedWithReportsOff(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	p := heldPayload()
	p.Runtime = nil // no load reports
	le := startLoadEdge(t, p)
	a := heldAgent(t, h)
	startNode(t, le.fakeEdge, a)
	select {
	case r := <-le.loads:
		t.Fatalf("a load report with reports off: %v", r)
	default:
	}
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, r := range waitLoads(t, le, 3, 10*time.Second) {
		if len(r.GetProviders()) != 2 || r.GetProviders()[0].GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING {
			t.Fatalf("report during the drain: %v", r)
		}
	}
	if took := time.Since(start); took > 3*drainReportEvery+5*time.Second {
		t.Fatalf("three draining reports took %s", took)
	}
}
