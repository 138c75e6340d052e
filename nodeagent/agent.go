// Package nodeagent is the Node: the connection supervisor, the session
// handler that serves Edge-opened streams (runs, tunnels, cancels, commands,
// config refresh), and the registry of adapter instances with their local
// capacity gates. Adapters themselves live in sub-packages.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// instance is one live adapter instance with its gate and counters.
type instance struct {
	name string
	// cfg is replaced (never mutated) by a refresh that reconfigures the
	// instance in place, while commands and snapshots read it unlocked.
	cfg   atomic.Pointer[iop.AdapterConfig]
	impl  adapter.Instance
	gate  *gate
	stats usageStats

	// users counts the runs and tunnels admitted to this instance (taken
	// under Agent.mu, so none is taken once a refresh has dropped it);
	// retired is set when a refresh removes or replaces the instance. A
	// retired instance is closed by whoever sees it unused: the refresh,
	// or the last exchange to leave it, never while one still uses it.
	umu     sync.Mutex
	users   int  // guarded by umu
	retired bool // guarded by umu
}

// exit gives back what admit took: the gate's slot and the use of the
// instance, closing the instance if a refresh retired it meanwhile.
func (in *instance) exit() {
	in.gate.release()
	in.umu.Lock()
	in.users--
	closeNow := in.users == 0 && in.retired
	in.umu.Unlock()
	if closeNow {
		_ = in.impl.Close()
	}
}

// retire marks an instance a refresh dropped (Agent.mu held, so no
// exchange is admitted to it any more): it is closed now if unused, else
// by its last exchange's exit.
func (in *instance) retire() {
	in.umu.Lock()
	in.retired = true
	closeNow := in.users == 0
	in.umu.Unlock()
	if closeNow {
		_ = in.impl.Close()
	}
}

type usageStats struct {
	requests         atomic.Int64
	errors           atomic.Int64
	rejected         atomic.Int64
	promptTokens     atomic.Int64
	completionTokens atomic.Int64
}

func (s *usageStats) addUsage(u *iop.Usage) {
	if u == nil {
		return
	}
	s.promptTokens.Add(u.GetPromptTokens())
	s.completionTokens.Add(u.GetCompletionTokens())
}

// Agent holds the Node's adapter instances and serves the Edge's streams.
type Agent struct {
	log       *zap.Logger
	env       adapter.Env
	factories map[string]adapter.Factory

	mu        sync.RWMutex
	instances map[string]*instance   // guarded by mu: by AdapterConfig.name
	nodeID    string                 // guarded by mu
	applied   *iop.NodeConfigPayload // guarded by mu
	// retiredGates is guarded by mu: the gates of instances a refresh
	// removed while exchanges still held slots, by name, so that the name
	// coming back before they end counts them against its capacity. (Not
	// to be confused with the node draining: see stopping.)
	retiredGates map[string]*gate

	tracer trace.Tracer // spans for runs and tunnels; no-op unless SetTracerProvider

	runsMu sync.Mutex // guards runs and cut
	// runs is guarded by runsMu: run id -> the cancel of its context.
	runs map[string]context.CancelCauseFunc
	// cut is guarded by runsMu: set by Cut, never cleared; a run claimed
	// after it is cut at once.
	cut bool

	// stopping is set (under mu, so that admit, which reads it under mu,
	// admits nothing after) when Drain begins, and never cleared.
	stopping atomic.Bool
	// exchanges counts the runs and tunnels admitted and not yet ended
	// (their terminal message written; the stream is dropped right
	// after), node-wide.
	exchanges atomic.Int64
	// idle is closed (once, by idleOnce) when exchanges drops to zero
	// while stopping: it stays zero then (admit counts none any more), so
	// every Drain waiting may return, not only one.
	idle     chan struct{}
	idleOnce sync.Once

	// drainBegun is cancelled by the first Drain (after stopping is set):
	// it cuts short a load report's sample of the backends.
	drainBegun context.Context
	beginDrain context.CancelFunc

	wakeMu sync.Mutex // guards wakes
	// wakes is guarded by wakeMu: one channel per waiter that must act
	// at once when Drain begins (wakeOnDrain), poked then: each live
	// session's load report loop (the edge hears of it at once rather
	// than at its next report), and each supervisor or edge-name loop
	// waiting to reconnect or look up again (it stops instead).
	wakes map[chan struct{}]struct{}
}

// NewAgent returns an agent that builds instances with factories (by type).
func NewAgent(factories map[string]adapter.Factory, env adapter.Env) *Agent {
	if env.Logger == nil {
		env.Logger = zap.NewNop()
	}
	drainBegun, beginDrain := context.WithCancel(context.Background())
	return &Agent{
		log: env.Logger, env: env, factories: factories, drainBegun: drainBegun, beginDrain: beginDrain,
		instances: map[string]*instance{}, retiredGates: map[string]*gate{}, runs: map[string]context.CancelCauseFunc{},
		idle: make(chan struct{}), wakes: map[chan struct{}]struct{}{},
		tracer: noop.NewTracerProvider().Tracer(""),
	}
}

// SetTracerProvider makes runs and tunnels spans of tp, continuing the
// Edge's trace carried in their metadata. Call before serving.
func (a *Agent) SetTracerProvider(tp trace.TracerProvider) {
	a.tracer = tp.Tracer("github.com/iop-gateway/iop/nodeagent")
}

// Close closes every instance.
func (a *Agent) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, in := range a.instances {
		_ = in.impl.Close()
		delete(a.instances, name)
	}
}

// AdapterTypes lists the types this Node can build.
func (a *Agent) AdapterTypes() []string {
	var out []string
	for t := range a.factories {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Apply makes payload the live adapter configuration. With initial set (a
// new session) every instance may be rebuilt; otherwise (a refresh) a type
// change answers RESTART_REQUIRED and changes nothing. An invalid payload
// answers FAILED and changes nothing: new instances are built and every
// change is validated before anything is swapped in.
func (a *Agent) Apply(payload *iop.NodeConfigPayload, initial bool) (iop.RefreshStatus, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := map[string]*iop.AdapterConfig{}
	var errs []error
	for i, ac := range payload.GetAdapters() {
		name := ac.GetName()
		if name == "" {
			name = ac.GetType() // legacy single-instance name
		}
		if names[name] != nil {
			errs = append(errs, fmt.Errorf("adapters[%d]: name %q is duplicated", i, name))
		}
		names[name] = ac
		if a.factories[ac.GetType()] == nil {
			errs = append(errs, fmt.Errorf("adapters[%d] %q: type %q is not supported by this node", i, name, ac.GetType()))
		}
		if ac.GetCapacity() < 0 {
			errs = append(errs, fmt.Errorf("adapters[%d] %q: negative capacity", i, name))
		}
	}
	if len(errs) > 0 {
		return iop.RefreshStatus_REFRESH_STATUS_FAILED, errors.Join(errs...)
	}
	if !initial {
		for name, ac := range names {
			if old := a.instances[name]; old != nil && old.cfg.Load().GetType() != ac.GetType() {
				return iop.RefreshStatus_REFRESH_STATUS_RESTART_REQUIRED,
					fmt.Errorf("adapter %q changes type %s -> %s", name, old.cfg.Load().GetType(), ac.GetType())
			}
		}
	}

	// Build or validate every instance before touching the live set.
	type change struct {
		name    string
		cfg     *iop.AdapterConfig
		fresh   adapter.Instance // a new instance to swap in
		reconf  adapter.Reconfigurer
		keepOld bool
	}
	var changes []change
	fail := func(err error) (iop.RefreshStatus, error) {
		for _, c := range changes {
			if c.fresh != nil {
				_ = c.fresh.Close()
			}
		}
		return iop.RefreshStatus_REFRESH_STATUS_FAILED, err
	}
	for name, ac := range names {
		ac = proto.Clone(ac).(*iop.AdapterConfig)
		ac.Name = name
		old := a.instances[name]
		if old != nil && proto.Equal(old.cfg.Load(), ac) {
			changes = append(changes, change{name: name, cfg: ac, keepOld: true})
			continue
		}
		fresh, err := a.factories[ac.GetType()](ac, a.env)
		if err != nil {
			return fail(fmt.Errorf("adapter %q: %w", name, err))
		}
		if old != nil && old.cfg.Load().GetType() == ac.GetType() {
			if rc, ok := old.impl.(adapter.Reconfigurer); ok {
				// Validated by the factory above; reconfigure in place to keep
				// state such as CLI sessions.
				_ = fresh.Close()
				changes = append(changes, change{name: name, cfg: ac, reconf: rc})
				continue
			}
		}
		changes = append(changes, change{name: name, cfg: ac, fresh: fresh})
	}
	for _, c := range changes {
		if c.reconf != nil {
			if err := c.reconf.Reconfigure(c.cfg); err != nil {
				return fail(fmt.Errorf("adapter %q: reconfigure: %w", c.name, err))
			}
		}
	}
	// Swap.
	next := map[string]*instance{}
	for _, c := range changes {
		old := a.instances[c.name]
		switch {
		case c.keepOld:
			next[c.name] = old
		case c.reconf != nil:
			old.cfg.Store(c.cfg)
			old.gate.setCapacity(int(c.cfg.GetCapacity()))
			next[c.name] = old
		default:
			in := &instance{name: c.name, impl: c.fresh, gate: &gate{}}
			in.cfg.Store(c.cfg)
			// Keep the gate of the instance replaced (or of one removed
			// earlier whose exchanges have not all ended) so that those
			// still count against the capacity.
			if old != nil {
				in.gate = old.gate
				old.retire()
			} else if g := a.retiredGates[c.name]; g != nil {
				in.gate = g
			}
			in.gate.setCapacity(int(c.cfg.GetCapacity()))
			next[c.name] = in
		}
	}
	for name, old := range a.instances {
		if next[name] == nil {
			a.retiredGates[name] = old.gate
			old.retire()
		}
	}
	for name, g := range a.retiredGates {
		if _, inFlight := g.state(); next[name] != nil || inFlight == 0 {
			delete(a.retiredGates, name)
		}
	}
	a.instances = next
	a.applied = payload
	a.log.Info("adapter config applied", zap.Int("adapters", len(next)), zap.String("config_version", payload.GetConfigVersion()))
	return iop.RefreshStatus_REFRESH_STATUS_APPLIED, nil
}

// Admission refusals (admit).
var (
	errNoAdapter  = errors.New("nodeagent: no such adapter")
	errAtCapacity = errors.New("nodeagent: adapter at capacity")
	// errDraining refuses work that reaches the node after Drain began
	// (an edge that had not yet taken the draining report in): the edge
	// fails it over to another candidate, as for a full gate.
	errDraining = errors.New("nodeagent: node is draining")
)

// admit finds the instance named name and takes a slot of its gate and a
// use of it, both given back by exit, and counts an exchange, which the
// caller ends with leave once its terminal message is out. It fails with
// errNoAdapter (in nil), errAtCapacity (in set, holding nothing) or
// errDraining (holding nothing).
func (a *Agent) admit(name string) (in *instance, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	in = a.instances[name]
	switch {
	case in == nil:
		return nil, errNoAdapter
	case a.stopping.Load():
		return in, errDraining
	case !in.gate.tryAcquire():
		return in, errAtCapacity
	}
	in.umu.Lock()
	in.users++
	in.umu.Unlock()
	a.exchanges.Add(1)
	return in, nil
}

// leave ends an exchange admit counted; the last one to end while the
// node drains lets Drain return.
func (a *Agent) leave() {
	if a.exchanges.Add(-1) == 0 && a.stopping.Load() {
		a.idleOnce.Do(func() { close(a.idle) })
	}
}

// Drain makes the node take no new runs or tunnels (those that arrive are
// refused with CAPACITY_EXCEEDED, which edges fail over on), tells every
// edge it has a session with at once that each provider is draining (a
// load report now, whatever the report interval), and waits until every
// run and tunnel in flight has ended, or ctx ends (then it returns ctx's
// error; the caller stops the sessions, cutting what still runs). There
// is no way back: the node is stopping. Calling it again only waits.
func (a *Agent) Drain(ctx context.Context) error {
	a.stop()
	return a.awaitIdle(ctx)
}

// stop makes the node take no new work and tells its edges, the first time.
func (a *Agent) stop() {
	a.mu.Lock()
	first := !a.stopping.Swap(true)
	a.mu.Unlock()
	if !first {
		return
	}
	a.beginDrain()
	a.log.Info("draining: taking no new work", zap.Int64("in_flight", a.exchanges.Load()))
	a.wakeMu.Lock()
	for w := range a.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	a.wakeMu.Unlock()
}

// awaitIdle waits, once the node is stopping, until no run or tunnel is in
// flight, or ctx ends (then it returns ctx's error).
func (a *Agent) awaitIdle(ctx context.Context) error {
	if a.exchanges.Load() == 0 {
		return nil
	}
	if drainWaitsHook != nil {
		drainWaitsHook()
	}
	select {
	case <-a.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrNodeStopping is the cause of the context of a run or tunnel that Cut
// ended.
var ErrNodeStopping = errors.New("nodeagent: node stopping")

// CutWait bounds how long a stopping node waits for the terminals of the
// work it cuts (Cut's ctx) before it closes its sessions: an adapter ends
// a cancelled request in milliseconds (a CLI process may take its kill
// grace; the connection's close then ends it). A node's stop takes up to
// shutdown.drain_sec plus this: a container's stop grace must be longer.
const CutWait = 2 * time.Second

// Cut is the node's last word on the work still in flight when it stops
// (after Drain's bound, on a second signal, or at once without a drain):
// it takes no new work (as Drain), ends every run and tunnel still in
// flight (their contexts cancelled with ErrNodeStopping as the cause),
// each with a terminal that says the node stopped and that another
// candidate may serve it (CAPACITY_EXCEEDED, as a draining node's
// refusal: an edge that has sent the caller nothing yet fails over), and
// waits until their terminals are written or ctx ends (then it returns
// ctx's error). Closing the sessions without it cut the work with the
// connection: the edge saw either a lost node or the adapter's own
// "internal adapter error", whichever came first. A run or tunnel without
// an id (none an edge sends) is not reached: the connection's close ends
// it.
func (a *Agent) Cut(ctx context.Context) error {
	a.stop()
	a.runsMu.Lock()
	a.cut = true
	cancels := make([]context.CancelCauseFunc, 0, len(a.runs))
	for _, cancel := range a.runs {
		cancels = append(cancels, cancel)
	}
	a.runsMu.Unlock()
	if len(cancels) > 0 {
		a.log.Info("stopping: ending the work still in flight", zap.Int("runs", len(cancels)))
	}
	for _, cancel := range cancels {
		cancel(ErrNodeStopping)
	}
	return a.awaitIdle(ctx)
}

// drainWaitsHook, nil in production, runs in Drain just before it waits
// for the work in flight: a test seam, as two Drains waiting at once
// cannot be told from outside.
var drainWaitsHook func()

// Draining reports whether Drain has begun.
func (a *Agent) Draining() bool { return a.stopping.Load() }

// wakeOnDrain registers a channel Drain pokes; the returned func removes it.
func (a *Agent) wakeOnDrain() (<-chan struct{}, func()) {
	w := make(chan struct{}, 1)
	a.wakeMu.Lock()
	a.wakes[w] = struct{}{}
	a.wakeMu.Unlock()
	return w, func() {
		a.wakeMu.Lock()
		delete(a.wakes, w)
		a.wakeMu.Unlock()
	}
}

// category is the instance's resource kind: as configured, else as its
// adapter declares, else api.
func (in *instance) category() string {
	if c := in.cfg.Load().GetCategory(); c != "" {
		return c
	}
	if r, ok := in.impl.(adapter.CapabilityReporter); ok {
		if c := r.Capabilities().GetCategory(); c != "" {
			return c
		}
	}
	return adapter.CategoryAPI
}

// Capabilities lists what each adapter instance can serve, as the node
// reports it to the Edge.
func (a *Agent) Capabilities() []*iop.AdapterCapabilities {
	var out []*iop.AdapterCapabilities
	for _, in := range a.snapshotInstances() {
		var c *iop.AdapterCapabilities
		if r, ok := in.impl.(adapter.CapabilityReporter); ok {
			c = r.Capabilities()
		} else {
			c = adapter.DefaultCapabilities()
		}
		c.Adapter = in.name
		out = append(out, c)
	}
	return out
}

func (a *Agent) snapshotInstances() []*instance {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]*instance, 0, len(a.instances))
	for _, in := range a.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (a *Agent) untrackRun(id string) {
	a.runsMu.Lock()
	delete(a.runs, id)
	a.runsMu.Unlock()
}

func (a *Agent) cancelRun(id string) bool {
	a.runsMu.Lock()
	cancel := a.runs[id]
	a.runsMu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
	return cancel != nil
}
