// Package stack starts a whole iop deployment in-process on loopback — an
// edge (dispatcher, node listener, HTTP surface) and any number of nodes
// (agent, supervisor, real adapters) — for end-to-end tests, chaos runs and
// benchmarks. Everything talks over real TCP sockets.
package stack

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/internal/edgeapp"
	"github.com/iop-gateway/iop/internal/testwait"
	"github.com/iop-gateway/iop/nodeagent"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/adapters"
	"github.com/iop-gateway/iop/nodewire"
)

// Factories are the adapter factories iop-node registers.
func Factories() map[string]adapter.Factory { return adapters.Factories() }

// Edge is a running edge, wired exactly as iop-edge wires it (edgeapp).
type Edge struct {
	URL        string // http://127.0.0.1:port
	NodeAddr   string // node wire host:port
	Dispatcher *dispatch.Dispatcher
	Server     *gateway.Server
	Registry   *prometheus.Registry
	Bus        *dispatch.ChanBus
	Log        *zap.Logger

	app  *edgeapp.Edge
	done chan struct{}
	once sync.Once
}

// EdgeOptions tunes StartEdge.
type EdgeOptions struct {
	// Logger; nil means a test logger (zaptest) when t is set, else a nop.
	Logger *zap.Logger
	// Reload, when set, serves POST /admin/reload.
	Reload func() (*gateway.ReloadReport, error)
	// ConfigFile, when set (and Reload is not), is re-read by POST
	// /admin/reload exactly as iop-edge does.
	ConfigFile string
	// Tracer, when set, traces API requests.
	Tracer trace.TracerProvider
	// HealthInterval enables provider health polling (0: off).
	HealthInterval time.Duration
	// TLS, when set, is the node listener's TLS config.
	TLS *tls.Config
	// CancelGrace, when positive, is the base of the leases' cancel grace
	// (0: dispatch's default, 5 s): tests of nodes that never answer a
	// cancel shorten it rather than wait it out.
	CancelGrace time.Duration
}

// StartEdge starts an edge for cfg. cfg's listen addresses are replaced by
// ephemeral loopback ports. cfg is normalized here.
func StartEdge(tb testing.TB, cfg *config.Edge, opts EdgeOptions) *Edge {
	tb.Helper()
	cfg.Listen.HTTP, cfg.Listen.Node = "127.0.0.1:0", "127.0.0.1:0"
	if err := cfg.Normalize(); err != nil {
		tb.Fatalf("edge config: %v", err)
	}
	log := opts.Logger
	if log == nil {
		log = testLogger(tb)
	}
	health := opts.HealthInterval
	if health == 0 {
		health = -1 // off unless asked for
	}
	app, err := edgeapp.New(cfg, edgeapp.Options{
		Logger: log, Tracer: opts.Tracer, HealthInterval: health, Reload: opts.Reload, ConfigFile: opts.ConfigFile,
		NodeTLS: opts.TLS, HandshakeTimeout: 5 * time.Second, BusSize: 1024, CancelGrace: opts.CancelGrace,
	})
	if err != nil {
		tb.Fatal(err)
	}
	e := &Edge{
		URL: "http://" + app.HTTPAddr, NodeAddr: app.NodeAddr,
		Dispatcher: app.Dispatcher, Server: app.Server, Registry: app.Registry, Bus: app.Bus, Log: log,
		app: app, done: make(chan struct{}),
	}
	// Owner: the Edge; stops at Close.
	go func() { defer close(e.done); _ = app.Serve() }()
	tb.Cleanup(e.Close)
	return e
}

// Close stops the edge. Idempotent.
func (e *Edge) Close() {
	e.once.Do(func() {
		e.app.Close()
		<-e.done
	})
}

// Node is a running node agent.
type Node struct {
	ID    string
	Agent *nodeagent.Agent

	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// NodeOptions tunes StartNode.
type NodeOptions struct {
	Token       string
	Interval    time.Duration // default 50ms
	MaxAttempts int           // default 0 (unlimited)
	StoreDir    string        // default t.TempDir()
	Workspace   string        // default t.TempDir()
	Logger      *zap.Logger
	Getenv      func(string) string
	Dial        *nodewire.DialConfig // overrides address/TLS when set
	Tracer      trace.TracerProvider // spans for runs and tunnels when set
	MoreEdges   []string             // further edges the node keeps a session with (a cluster)
}

// StartNode starts a node that dials addr as id.
func StartNode(tb testing.TB, addr, id string, opts NodeOptions) *Node {
	tb.Helper()
	if opts.Interval == 0 {
		opts.Interval = 50 * time.Millisecond
	}
	if opts.StoreDir == "" {
		opts.StoreDir = tb.TempDir()
	}
	if opts.Workspace == "" {
		opts.Workspace = tb.TempDir()
	}
	log := opts.Logger
	if log == nil {
		log = zaptest.NewLogger(tb, zaptest.Level(zap.WarnLevel)).With(zap.String("node_id", id))
	}
	agent := nodeagent.NewAgent(Factories(), adapter.Env{StoreDir: opts.StoreDir, WorkspaceRoot: opts.Workspace, Logger: log, Getenv: opts.Getenv})
	if opts.Tracer != nil {
		agent.SetTracerProvider(opts.Tracer)
	}
	dial := nodewire.DialConfig{Address: addr, Logger: log, HandshakeTimeout: 5 * time.Second}
	if opts.Dial != nil {
		dial = *opts.Dial
	}
	policy := nodeagent.SupervisorConfig{
		Dial: dial, NodeID: id, Token: opts.Token, Version: "test",
		Interval: opts.Interval, MaxAttempts: opts.MaxAttempts,
	}
	addrs := append([]string{dial.Address}, opts.MoreEdges...)
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{ID: id, Agent: agent, cancel: cancel, done: make(chan struct{})}
	// Owner: the Node; stops when Stop cancels ctx (or the supervisor gives
	// up on its own).
	go func() {
		defer close(n.done)
		n.err = nodeagent.RunEdges(ctx, policy, addrs, false, agent, log)
		agent.Close()
	}()
	tb.Cleanup(n.Stop)
	return n
}

// Stop shuts the node down (as SIGTERM would) and waits. Idempotent.
func (n *Node) Stop() {
	n.cancel()
	<-n.done
}

// Drain stops the node as iop-node does on SIGTERM with
// shutdown.drain_sec = bound: it takes no new work, tells its edges, lets
// the runs and tunnels in flight finish for at most bound (bound 0: not
// at all), then stops and waits. It returns the drain's result: nil when
// everything in flight ended, else the bound's context error.
func (n *Node) Drain(bound time.Duration) error {
	var err error
	if bound > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		err = n.Agent.Drain(ctx)
		cancel()
	}
	// As iop-node's stop: what still runs is cut with a terminal that
	// says so (bounded as its cutWait) before the session closes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = n.Agent.Cut(ctx)
	cancel()
	n.Stop()
	return err
}

// Done is closed when the node's supervisor has returned.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the supervisor's result, valid after Done.
func (n *Node) Err() error { return n.err }

// WaitReady waits until the edge reports node id connected.
func (e *Edge) WaitReady(tb testing.TB, id string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range e.Dispatcher.Status().Nodes {
			if n.ID == id && n.Connected {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("node %s not ready after %s", id, timeout)
}

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	testwait.Until(tb, timeout, 5*time.Millisecond, what, cond)
}
