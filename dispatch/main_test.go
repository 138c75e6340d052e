package dispatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/internal/testwait"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitDeadline bounds every wait on a condition. It is generous: the machine
// is small and shared; a passing run never comes near it.
const waitDeadline = 10 * time.Second

const testToken = "node-secret"

// tb is the part of testing.TB (and *rapid.T) the helpers need.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

type tProv struct {
	name      string
	cap, long int
}

type tNode struct {
	id    string
	provs []tProv
}

type tModel struct {
	name     string
	long     int     // long_context_tokens
	timeout  float64 // queue_timeout_sec (0: default)
	maxQueue int     // max_queue (0: default)
	cands    []string
}

// buildCfg returns a normalized edge config: every provider is a mock, every
// node has testToken, model candidates are "node/provider".
func buildCfg(t tb, nodes []tNode, models []tModel) *config.Edge {
	t.Helper()
	cfg := &config.Edge{}
	for _, n := range nodes {
		ns := config.NodeSpec{ID: n.id, Token: testToken}
		for _, p := range n.provs {
			ns.Providers = append(ns.Providers, config.ProviderSpec{Name: p.name, Type: "mock", Capacity: p.cap, LongCapacity: p.long})
		}
		cfg.Nodes = append(cfg.Nodes, ns)
	}
	for _, m := range models {
		ms := config.ModelSpec{Name: m.name, LongContextTokens: m.long, QueueTimeoutSec: m.timeout, MaxQueue: m.maxQueue}
		for _, c := range m.cands {
			node, prov, ok := strings.Cut(c, "/")
			if !ok {
				t.Fatalf("bad candidate %q", c)
			}
			ms.Providers = append(ms.Providers, config.ModelProvider{Node: node, Provider: prov, Target: "target-" + prov})
		}
		cfg.Models = append(cfg.Models, ms)
	}
	if err := cfg.Normalize(); err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// recBus records every event.
type recBus struct {
	mu sync.Mutex
	ev []Event
}

func (b *recBus) Publish(e Event) {
	b.mu.Lock()
	b.ev = append(b.ev, e)
	b.mu.Unlock()
}

func (b *recBus) types() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.ev {
		out = append(out, e.Type)
	}
	return out
}

// dropBus drops every event.
type dropBus struct{}

func (dropBus) Publish(Event) {}

// caps is what node's adapters declare for its current config.
func (f *fixture) caps(node string) []*iop.AdapterCapabilities {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	for i := range f.d.cfg.Nodes {
		if n := &f.d.cfg.Nodes[i]; n.ID == node {
			return testcaps.For(NodePayload(n))
		}
	}
	return nil
}

type fixture struct {
	t   testing.TB
	d   *Dispatcher
	reg *prometheus.Registry
	bus *recBus
	wg  sync.WaitGroup // async Acquire goroutines
}

// newFixture builds a dispatcher over cfg with a recording bus (or bus when
// non-nil) and its own metrics registry. Cleanup closes the dispatcher
// (failing every waiter) and waits for the test's Acquire goroutines.
func newFixture(t testing.TB, cfg *config.Edge, bus Bus) *fixture {
	t.Helper()
	f := &fixture{t: t, reg: prometheus.NewRegistry()}
	if bus == nil {
		f.bus = &recBus{}
		bus = f.bus
	}
	f.d = New(cfg, Options{Bus: bus, Metrics: NewMetrics(f.reg)})
	t.Cleanup(func() {
		f.d.Close()
		f.wg.Wait()
	})
	return f
}

func regReq(node, token string) *iop.RegisterRequest {
	return &iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: node, Token: token}
}

// register registers a fresh opaque connection identity for node and
// requires acceptance.
func (f *fixture) register(node string) *nodewire.Conn {
	f.t.Helper()
	c := new(nodewire.Conn)
	if resp := f.d.Register(c, regReq(node, testToken)); !resp.GetAccepted() {
		f.t.Fatalf("register %s: rejected: %v %s", node, resp.GetRejectCode(), resp.GetReason())
	}
	return c
}

func (f *fixture) ready(c *nodewire.Conn, node string) {
	f.t.Helper()
	if resp := f.d.Ready(c, &iop.NodeReadyRequest{NodeId: node, Adapters: f.caps(node)}); !resp.GetReady() {
		f.t.Fatalf("ready %s: refused: %s", node, resp.GetReason())
	}
	// The server activates once the answer was written.
	f.d.Activate(c)
}

// up registers and readies node on a new connection.
func (f *fixture) up(node string) *nodewire.Conn {
	f.t.Helper()
	c := f.register(node)
	f.ready(c, node)
	return c
}

// mustAcquire requires a lease without queueing for long.
func mustAcquire(t tb, d *Dispatcher, req Request) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	l, err := d.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("acquire %+v: %v", req, err)
	}
	return l
}

// mustOpenRun opens runReq's run on l, with no deadline.
func mustOpenRun(t *testing.T, l *Lease) *RunStream {
	t.Helper()
	rs, err := l.OpenRun(context.Background(), time.Time{}, runReq())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

type acqResult struct {
	l   *Lease
	err error
}

// acquireAsync runs Acquire in a goroutine; the result arrives on the
// returned channel.
func (f *fixture) acquireAsync(ctx context.Context, req Request) <-chan acqResult {
	ch := make(chan acqResult, 1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		l, err := f.d.Acquire(ctx, req)
		ch <- acqResult{l, err}
	}()
	return ch
}

// enqueue starts an Acquire for req and waits until it is queued (the
// model's pending count grew by one), so calls made one after another queue
// in that order.
func (f *fixture) enqueue(ctx context.Context, req Request) <-chan acqResult {
	f.t.Helper()
	before := pendingOf(f.d.Status(), req.Model)
	ch := f.acquireAsync(ctx, req)
	waitFor(f.t, "request queued", func() bool { return pendingOf(f.d.Status(), req.Model) == before+1 })
	return ch
}

func recv(t tb, ch <-chan acqResult) acqResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitDeadline):
		t.Fatalf("no Acquire result within %s", waitDeadline)
		return acqResult{}
	}
}

func recvLease(t tb, ch <-chan acqResult) *Lease {
	t.Helper()
	r := recv(t, ch)
	if r.err != nil {
		t.Fatalf("acquire: %v", r.err)
	}
	return r.l
}

// waitFor polls cond until it holds or waitDeadline passes.
func waitFor(t tb, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, waitDeadline, 200*time.Microsecond, what, cond)
}

func pendingOf(st Status, model string) int {
	for _, m := range st.Models {
		if m.Name == model {
			return m.Pending
		}
	}
	return -1
}

func nodeOf(st Status, id string) *NodeStatus {
	for i := range st.Nodes {
		if st.Nodes[i].ID == id {
			return &st.Nodes[i]
		}
	}
	return nil
}

func provOf(st Status, node, prov string) *ProviderStatus {
	if n := nodeOf(st, node); n != nil {
		for _, p := range n.Providers {
			if p.ProviderId == prov {
				return p
			}
		}
	}
	return nil
}

// metricValue sums the samples of the counter or gauge family name whose labels
// include every pair in want.
func metricValue(t tb, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

func released(node, prov string, reason ReleaseReason) map[string]string {
	return map[string]string{"node": node, "provider": prov, "reason": string(reason)}
}

func wantErr(t tb, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("error = %v, want %v", got, want)
	}
}
