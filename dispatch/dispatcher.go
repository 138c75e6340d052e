// Package dispatch is the Edge's authority over Nodes and their providers:
// the node registry (ownership, readiness, generation fencing), the provider
// pool (resources with capacity and long-request slots), the per-model
// queues, leases, and status snapshots. It implements
// nodewire.ServerHandler; it never builds HTTP responses.
package dispatch

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/dispatch/route"
	"github.com/iop-gateway/iop/nodewire"
)

// Errors the gateway maps to its HTTP surface.
var (
	ErrModelNotFound = errors.New("dispatch: model not found")
	ErrNoProvider    = errors.New("dispatch: no provider available")
	// ErrNoCapableProvider: none of the model's candidates can serve this
	// kind of request at all (it needs the tunnel; they are all run-only).
	ErrNoCapableProvider  = errors.New("dispatch: no provider of the model can serve this request")
	ErrQueueFull          = errors.New("dispatch: queue full")
	ErrQueueTimeout       = errors.New("dispatch: queue wait timed out")
	ErrNodeLost           = errors.New("dispatch: node lost")
	ErrInvalidRequest     = errors.New("dispatch: request cannot be sent to a node")
	ErrLeaseReleased      = errors.New("dispatch: lease already released")
	ErrUnknownNode        = errors.New("dispatch: unknown node")
	ErrNodeNotReady       = errors.New("dispatch: node not ready")
	ErrDispatcherShutdown = errors.New("dispatch: shutting down")
)

// Options configures a Dispatcher.
type Options struct {
	Logger *zap.Logger
	// Bus receives lifecycle events; nil drops them.
	Bus     Bus
	Metrics *Metrics
	// HealthInterval is how often ready nodes are asked for their
	// providers' backend health (vLLM /health, Ollama reachability). A
	// provider its node reports offline takes no new leases until it
	// recovers. Zero disables polling (every live provider counts as ok).
	HealthInterval time.Duration
	// Ledger, when set, shares lease accounting with the cluster's other
	// edges (see shared.go); LedgerTTL is its leases' time to live.
	Ledger    *cluster.Ledger
	LedgerTTL time.Duration
	// CancelGrace is the base of every lease's CancelGrace (how long a
	// cancelled exchange waits for the node's terminal message before
	// the lease returns anyway). Zero or negative means the default, 5 s:
	// production keeps it; tests of silent nodes shorten it so as not to
	// wait it out. A CLI provider's kill_grace_ms plus a 3 s margin still
	// raises it, and 2 min still caps it.
	CancelGrace time.Duration
}

// Dispatcher owns the registry and the pool. One mutex guards both so that
// a lifecycle transition and its lease/queue consequences are one step.
type Dispatcher struct {
	log     *zap.Logger
	bus     Bus
	metrics *Metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background work (health polling)

	mu        sync.Mutex
	cfg       *config.Edge             // guarded by mu
	nodes     map[string]*node         // guarded by mu: by node id
	connNode  map[*nodewire.Conn]*node // guarded by mu: accepted connections
	models    map[string]*model        // guarded by mu: by external name
	waiterSeq uint64                   // guarded by mu: last waiter.seq given
	affinity  *affinityCache           // guarded by mu
	responses *affinityCache           // guarded by mu: response id → the resource that answered it (RememberResponse)
	nextResID uint32                   // guarded by mu: last resource.id given
	epoch     time.Time                // set once: the origin of waiter keys
	// Scratch of pickLocked, guarded by mu.
	pickFit    []*candidate
	pickCands  []route.Candidate
	pickIDs    []uint32
	pickMatch  []int
	genCounter uint64               // guarded by mu
	events     []Event              // guarded by mu: recent events ring
	resources  map[resKey]*resource // guarded by mu
	// ledger is the cluster's shared lease ledger (nil: this process
	// only); returns feeds its returner. Both set once in New.
	ledger  *cluster.Ledger
	returns chan cluster.Update
	// shareResp shares remembered response ids through the ledger (nil
	// without one). Set once in New; its stopped flag is guarded by mu.
	shareResp *responseShare
	// takes counts the ledger takes in flight (hand-ons and fresh
	// grants): the returner's last batch at Close waits for them, so that
	// the returns they queue (a take that succeeded for a waiter Close
	// failed, or whose answer was lost) are sent, not left to the TTL.
	// Added to under mu, and only before Close cancels ctx.
	takes sync.WaitGroup
	// ledgerDownUntil: grants fail at once until then (guarded by mu).
	ledgerDownUntil time.Time
	// graceBase is Options.CancelGrace, or the default when that is not
	// positive: the base of the resources' cancel grace. Set once in New.
	graceBase time.Duration
}

// New builds a dispatcher for cfg (already normalized).
func New(cfg *config.Edge, opts Options) *Dispatcher {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Bus == nil {
		opts.Bus = nopBus{}
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{
		log: opts.Logger, bus: opts.Bus, metrics: opts.Metrics,
		ctx: ctx, cancel: cancel,
		nodes:     map[string]*node{},
		connNode:  map[*nodewire.Conn]*node{},
		models:    map[string]*model{},
		affinity:  newAffinityCache(10000),
		responses: newExpiringCache(MaxRememberedResponses, RememberedResponseTTL),
		epoch:     time.Now(),
		resources: map[resKey]*resource{},
		ledger:    opts.Ledger,
		graceBase: opts.CancelGrace,
	}
	if d.graceBase <= 0 {
		d.graceBase = baseCancelGrace
	}
	if d.ledger != nil {
		d.startCluster(opts.LedgerTTL)
		d.startResponseShare()
	}
	d.mu.Lock()
	d.applyConfigLocked(cfg)
	d.mu.Unlock()
	if opts.HealthInterval > 0 {
		d.wg.Add(1)
		// Owner: the Dispatcher. Stops when Close cancels d.ctx.
		go func() {
			defer d.wg.Done()
			d.pollHealth(opts.HealthInterval)
		}()
	}
	return d
}

// Close fails every waiter with ErrDispatcherShutdown and refuses new
// registrations. Connections are closed by the nodewire.Server.
func (d *Dispatcher) Close() {
	d.cancel()
	defer d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.models {
		d.failWaitersLocked(m, ErrDispatcherShutdown)
	}
}

// Config returns the current config (read-only).
func (d *Dispatcher) Config() *config.Edge {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// applyConfigLocked (re)builds nodes, resources and models from cfg,
// keeping live state (owners, generations, leases, waiters) of entries that
// survive. Resources of removed providers go offline.
func (d *Dispatcher) applyConfigLocked(cfg *config.Edge) {
	d.cfg = cfg
	seenNodes := map[string]bool{}
	referenced := cfg.ReferencedProviders()
	for i := range cfg.Nodes {
		spec := &cfg.Nodes[i]
		seenNodes[spec.ID] = true
		n := d.nodes[spec.ID]
		if n == nil {
			n = &node{id: spec.ID, resources: map[string]*resource{}}
			d.nodes[spec.ID] = n
		}
		n.tokenDigest = sha256.Sum256([]byte(spec.Token))
		provNames := make([]string, 0, len(spec.Providers))
		for j := range spec.Providers {
			provNames = append(provNames, spec.Providers[j].Name)
		}
		d.metrics.declare(spec.ID, provNames)
		for j := range spec.Providers {
			ps := &spec.Providers[j]
			key := resKey{spec.ID, ps.Name}
			r := d.resources[key]
			if r == nil {
				d.nextResID++
				// What the provider's adapter last declared, should the
				// node still run it (a provider a reload dropped and
				// restored).
				r = &resource{key: key, id: d.nextResID, ledgerKey: cluster.Key(key.node, key.provider), leases: map[*Lease]struct{}{}, downSince: time.Now(),
					caps: n.caps[ps.Name]}
				d.resources[key] = r
				n.resources[ps.Name] = r
			}
			r.referenced = contains(referenced[spec.ID], ps.Name)
		}
		d.syncSpecsLocked(n, spec)
	}
	for id, n := range d.nodes {
		if !seenNodes[id] && n.owner != nil {
			c := n.owner
			d.transitionLocked(n, evClosed, c, "removed from the config")
			delete(d.connNode, c)
			go func() { _ = c.Close() }() // Owner: none needed; Close is bounded.
		}
		// Providers gone from the config (all of a removed node's) retire.
		d.transitionLocked(n, evConfigured, nil, "")
		if !seenNodes[id] {
			delete(d.nodes, id)
		}
	}
	newModels := map[string]*model{}
	for i := range cfg.Models {
		ms := &cfg.Models[i]
		m := d.models[ms.Name]
		if m == nil {
			m = newModel(ms.Name)
		}
		m.spec = *ms
		m.strategy, _ = route.ParseStrategy(ms.Routing) // validated with the config
		if m.strategy != route.PrefixAffinity {
			m.prefixes = nil
		} else if m.prefixes == nil {
			m.prefixes = route.NewPrefixes(route.DefaultMaxEntries)
		}
		m.cands = m.cands[:0]
		for _, mp := range ms.Providers {
			if r := d.resources[resKey{mp.Node, mp.Provider}]; r != nil {
				m.cands = append(m.cands, candidate{res: r, target: mp.Target})
			}
		}
		newModels[ms.Name] = m
	}
	for name, m := range d.models {
		if newModels[name] == nil {
			d.failWaitersLocked(m, ErrModelNotFound)
		}
	}
	d.models = newModels
	for _, r := range d.resources {
		r.models = r.models[:0]
	}
	for _, m := range newModels {
		for _, c := range m.cands {
			if !slices.Contains(c.res.models, m) {
				c.res.models = append(c.res.models, m)
			}
		}
	}
	d.failStrandedLocked()
	for _, r := range d.resources {
		d.pumpLocked(r)
	}
}

// setRunningLocked records the config n's session runs (nil: none) and
// aligns its resources with it.
func (d *Dispatcher) setRunningLocked(n *node, running *config.NodeSpec) {
	n.running, n.runningUnsure = running, false
	if desired := d.cfg.Node(n.id); desired != nil {
		d.syncSpecsLocked(n, desired)
	}
}

// syncSpecsLocked sets each resource of n (the providers of desired, the
// edge's config for n) to the spec n actually runs: its running config's
// version of the provider while a session exists, the desired one
// otherwise (the next registration delivers it). A provider missing from
// the running config cannot go live until the node applies a config that
// has it.
func (d *Dispatcher) syncSpecsLocked(n *node, desired *config.NodeSpec) {
	for j := range desired.Providers {
		ps := &desired.Providers[j]
		r := n.resources[ps.Name]
		if r == nil {
			continue
		}
		r.setSpec(ps, d.graceBase)
		r.onNode = true
		if n.running == nil {
			continue
		}
		r.onNode = false
		for k := range n.running.Providers {
			if rp := &n.running.Providers[k]; rp.Name == ps.Name {
				r.setSpec(rp, d.graceBase)
				r.onNode = true
				break
			}
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
