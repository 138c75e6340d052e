package dispatch

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// maxEvents bounds the recent-events ring shown by the admin page.
const maxEvents = 100

// Status is the /admin/status document. It never carries node addresses,
// tokens or transport internals.
type Status struct {
	Nodes  []NodeStatus  `json:"nodes"`
	Models []ModelStatus `json:"models"`
	// Cluster is the whole cluster's occupancy and queues (several edges
	// on Redis); absent for a lone edge. Nodes and Models are this edge's.
	Cluster *ClusterStatus `json:"cluster,omitempty"`
}

// NodeStatus is one configured node.
type NodeStatus struct {
	ID        string            `json:"id"`
	Connected bool              `json:"connected"`
	Providers []*ProviderStatus `json:"providers"`
	// ConfigVersion is the version of the config the node's session runs
	// ("" without a session); DesiredConfigVersion the edge's current one
	// for it. They differ after a reload the node has not applied
	// (refresh failed, or pending a restart).
	ConfigVersion        string `json:"config_version"`
	DesiredConfigVersion string `json:"desired_config_version"`
}

// ProviderStatus is the JSON form of a ProviderSnapshot (CONTRACT §5): the
// same fields, every figure always present.
type ProviderStatus struct {
	NodeId       string `json:"-"`
	ProviderId   string `json:"provider_id"`
	Type         string `json:"type"`
	Category     string `json:"category"`
	Status       string `json:"status"`
	Health       string `json:"health"`
	Capacity     int32  `json:"capacity"`
	LongCapacity int32  `json:"long_capacity"`
	InFlight     int32  `json:"in_flight"`
	LongInFlight int32  `json:"long_in_flight"`
	Queued       int32  `json:"queued"`
	LongQueued   int32  `json:"long_queued"`
	// ConfiguredCapacity and ConfiguredLongCapacity are the configured
	// slots whatever the provider's state: an offline provider reports
	// capacity 0 (CONTRACT §5) and these say what is missing.
	ConfiguredCapacity     int32 `json:"configured_capacity"`
	ConfiguredLongCapacity int32 `json:"configured_long_capacity"`
	// Waiting is the pending requests that list this provider as a
	// candidate, live or not (queued counts only live candidates): requests
	// stranded by an offline provider show here.
	Waiting int32 `json:"waiting"`
	// Backend load as its node last reported it (LoadReport, or the
	// health poll): requests running and waiting in the backend and its
	// KV-cache usage (0..1); all 0 while unknown or older than 30 s.
	BackendRunning float64 `json:"backend_running"`
	BackendWaiting float64 `json:"backend_waiting"`
	KVCacheUsage   float64 `json:"kv_cache_usage"`
}

// Snapshot converts to the wire's ProviderSnapshot.
func (p *ProviderStatus) Snapshot() *iop.ProviderSnapshot {
	return &iop.ProviderSnapshot{
		NodeId: p.NodeId, ProviderId: p.ProviderId, Type: p.Type, Category: p.Category,
		Status: p.Status, Health: healthState(p.Health), Capacity: p.Capacity, LongCapacity: p.LongCapacity,
		InFlight: p.InFlight, LongInFlight: p.LongInFlight, Queued: p.Queued, LongQueued: p.LongQueued,
	}
}

// ModelStatus is one model's queue.
type ModelStatus struct {
	Name    string `json:"name"`
	Pending int    `json:"pending"`
}

// Status snapshots every node, provider and model queue.
func (d *Dispatcher) Status() Status {
	d.mu.Lock()
	st, specs := d.snapshotLocked()
	d.mu.Unlock()
	// A config version hashes the node's whole payload (a marshal and a
	// SHA-256 per node, twice): with 100 nodes of 8 providers that is 2 ms,
	// which every Acquire and Release would wait out behind each scrape.
	// Applied specs are never changed in place (a reload swaps them), so
	// they are read after the lock is released.
	specs.versions(st)
	return st
}

// statusLocked is Status with d.mu held throughout.
func (d *Dispatcher) statusLocked() Status {
	st, specs := d.snapshotLocked()
	specs.versions(st)
	return st
}

// nodeSpecs are the specs behind each of a Status's nodes, in order: the
// edge's current one and the one the node's session runs (nil: none).
type nodeSpecs []struct{ desired, running *config.NodeSpec }

// versions fills in st's config versions from the specs.
func (s nodeSpecs) versions(st Status) {
	for i, sp := range s {
		st.Nodes[i].DesiredConfigVersion = NodePayload(sp.desired).GetConfigVersion()
		if sp.running != nil {
			st.Nodes[i].ConfigVersion = NodePayload(sp.running).GetConfigVersion()
		}
	}
}

// snapshotLocked is the status without its config versions, and the specs
// they are computed from.
func (d *Dispatcher) snapshotLocked() (Status, nodeSpecs) {
	// queued / long_queued: unique pending requests that include the
	// resource as a live candidate; one request counts for every such
	// resource.
	queued := map[*resource][2]int{}
	waiting := map[*resource]int{}
	now := time.Now()
	for _, m := range d.models {
		for _, c := range m.cands {
			if !c.res.referenced {
				continue
			}
			// Waiters a candidate could never serve (they need the
			// tunnel) are not counted against it.
			var all, long int
			for kind, q := range m.queues {
				if kindTunnel(kind) && !c.res.serves(true) {
					continue
				}
				all += q.Len()
				if kindLong(kind) {
					long += q.Len()
				}
			}
			waiting[c.res] += all
			if !c.res.live {
				continue
			}
			q := queued[c.res]
			q[0] += all
			q[1] += long
			queued[c.res] = q
		}
		// A waiter pinned to a provider counts against that one only.
		for k, pq := range m.pinned {
			waiting[k.res] += pq.Len()
			if k.res.live && k.res.referenced {
				q := queued[k.res]
				q[0] += pq.Len()
				if kindLong(k.kind) {
					q[1] += pq.Len()
				}
				queued[k.res] = q
			}
		}
	}
	var st Status
	var specs nodeSpecs
	for i := range d.cfg.Nodes {
		ns := &d.cfg.Nodes[i]
		n := d.nodes[ns.ID]
		if n == nil {
			continue
		}
		nst := NodeStatus{ID: n.id, Connected: n.state == stateReady, Providers: []*ProviderStatus{}}
		specs = append(specs, struct{ desired, running *config.NodeSpec }{ns, n.running})
		for _, ps := range ns.Providers {
			r := n.resources[ps.Name]
			if r == nil {
				continue
			}
			// The provider as the node runs it (see syncSpecsLocked).
			ps := r.spec
			snap := &ProviderStatus{
				NodeId: n.id, ProviderId: ps.Name, Type: ps.Type, Category: r.category(),
				Status: "unavailable", Health: "offline",
				ConfiguredCapacity: int32(ps.Capacity), ConfiguredLongCapacity: int32(ps.LongCapacity),
				Waiting: int32(waiting[r]),
			}
			if r.live {
				// An unreferenced provider is listed but never dispatched to.
				snap.Status, snap.Health = "available", HealthName(r.health)
				switch {
				case !r.referenced:
					snap.Status = "disabled"
				case r.health == iop.HealthState_HEALTH_STATE_OFFLINE:
					snap.Status = "unavailable"
				case r.health == iop.HealthState_HEALTH_STATE_DRAINING:
					// Its work in flight finishes; nothing new goes there.
					snap.Status = "draining"
				}
				snap.Capacity, snap.LongCapacity = int32(ps.Capacity), int32(ps.LongCapacity)
				snap.InFlight, snap.LongInFlight = int32(r.inFlight), int32(r.longInFlight)
				q := queued[r]
				snap.Queued, snap.LongQueued = int32(q[0]), int32(q[1])
				l := r.routeLoad(now)
				snap.BackendRunning, snap.BackendWaiting, snap.KVCacheUsage = l.Running, l.Waiting, l.KVUsage
			}
			nst.Providers = append(nst.Providers, snap)
		}
		st.Nodes = append(st.Nodes, nst)
	}
	for _, ms := range d.cfg.Models {
		if m := d.models[ms.Name]; m != nil {
			st.Models = append(st.Models, ModelStatus{Name: m.name, Pending: m.pending})
		}
	}
	sort.SliceStable(st.Models, func(i, j int) bool { return st.Models[i].Name < st.Models[j].Name })
	return st, specs
}

// Dispatchable reports whether at least one referenced provider is live
// (the /readyz condition).
func (d *Dispatcher) Dispatchable() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.resources {
		if r.live && r.referenced && !unservable(r.health) {
			return true
		}
	}
	return false
}

// RecentEvents returns the latest lifecycle events, oldest first. Unlike the
// bus, this ring never drops the newest.
func (d *Dispatcher) RecentEvents() []Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Event(nil), d.events...)
}

// recordEvent must be called with d.mu held (it is, from transitions).
//
// A refused registration is what anyone who reaches the node listener can
// cause, as often as it likes: it replaces the earlier entry for the same
// node and reason (moved to the end, counting both) rather than adding
// one, so such refusals hold at most one entry per configured node and
// reason (plus one for unknown ids) and never push the nodes' lifecycle
// events out of the ring.
func (d *Dispatcher) recordEvent(e Event) {
	if e.Type == EventNodeRejected {
		for i := len(d.events) - 1; i >= 0; i-- {
			if p := d.events[i]; p.Type == e.Type && p.NodeID == e.NodeID && p.Reason == e.Reason {
				e.Count = max(p.Count, 1) + 1
				d.events = append(d.events[:i], d.events[i+1:]...)
				break
			}
		}
	}
	if len(d.events) >= maxEvents {
		copy(d.events, d.events[1:])
		d.events = d.events[:maxEvents-1]
	}
	d.events = append(d.events, e)
}

// StatusCollector exports the state gauges of CONTRACT §6 from a snapshot
// taken at scrape time.
type StatusCollector struct{ d *Dispatcher }

// NewStatusCollector returns a prometheus.Collector over d.
func NewStatusCollector(d *Dispatcher) *StatusCollector { return &StatusCollector{d: d} }

var (
	descNodeConnected = prometheus.NewDesc("iop_node_connected", "1 while the node's session is dispatch-ready.", []string{"node"}, nil)
	descProviderUp    = prometheus.NewDesc("iop_provider_up", "1 while the provider is dispatchable.", []string{"node", "provider"}, nil)
	descCapacity      = prometheus.NewDesc("iop_provider_capacity", "Configured concurrent leases (0 while offline).", []string{"node", "provider"}, nil)
	descInFlight      = prometheus.NewDesc("iop_provider_in_flight", "Leases held.", []string{"node", "provider"}, nil)
	descLongInFlight  = prometheus.NewDesc("iop_provider_long_in_flight", "Long-request leases held.", []string{"node", "provider"}, nil)
	descQueued        = prometheus.NewDesc("iop_provider_queued", "Pending requests with this provider as a live candidate.", []string{"node", "provider"}, nil)
	descLongQueued    = prometheus.NewDesc("iop_provider_long_queued", "Long pending requests with this provider as a live candidate.", []string{"node", "provider"}, nil)
	descQueuePending  = prometheus.NewDesc("iop_queue_pending", "Requests waiting for a lease.", []string{"model"}, nil)
	descBackendRun    = prometheus.NewDesc("iop_backend_requests_running", "Requests the provider's backend reports running (vLLM num_requests_running; 0 while unknown).", []string{"node", "provider"}, nil)
	descBackendWait   = prometheus.NewDesc("iop_backend_requests_waiting", "Requests the provider's backend reports waiting (0 while unknown).", []string{"node", "provider"}, nil)
	descBackendKV     = prometheus.NewDesc("iop_backend_kv_cache_usage", "The provider's backend KV-cache usage, 0..1 (0 while unknown).", []string{"node", "provider"}, nil)
	descConfigCurrent = prometheus.NewDesc("iop_node_config_current",
		"0 while the node's session runs a config other than the edge's current one (a reload it has not applied), else 1.", []string{"node"}, nil)
)

// Describe implements prometheus.Collector.
func (c *StatusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeConnected, descProviderUp, descCapacity, descInFlight, descLongInFlight, descQueued, descLongQueued, descQueuePending, descConfigCurrent, descBackendRun, descBackendWait, descBackendKV} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StatusCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.Status()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, n := range st.Nodes {
		g(descNodeConnected, b2f(n.Connected), n.ID)
		g(descConfigCurrent, b2f(n.ConfigVersion == "" || n.ConfigVersion == n.DesiredConfigVersion), n.ID)
		for _, p := range n.Providers {
			g(descProviderUp, b2f(p.Status == "available"), n.ID, p.ProviderId)
			g(descCapacity, float64(p.Capacity), n.ID, p.ProviderId)
			g(descInFlight, float64(p.InFlight), n.ID, p.ProviderId)
			g(descLongInFlight, float64(p.LongInFlight), n.ID, p.ProviderId)
			g(descQueued, float64(p.Queued), n.ID, p.ProviderId)
			g(descLongQueued, float64(p.LongQueued), n.ID, p.ProviderId)
			g(descBackendRun, p.BackendRunning, n.ID, p.ProviderId)
			g(descBackendWait, p.BackendWaiting, n.ID, p.ProviderId)
			g(descBackendKV, p.KVCacheUsage, n.ID, p.ProviderId)
		}
	}
	for _, m := range st.Models {
		g(descQueuePending, float64(m.Pending), m.Name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NodeTransport returns the transport counters of node id's ready
// connection (for tests and diagnostics; never part of the status
// document), or false when the node is not ready.
func (d *Dispatcher) NodeTransport(id string) (nodewire.Stats, bool) {
	c, err := d.nodeConn(id)
	if err != nil {
		return nodewire.Stats{}, false
	}
	return c.Stats(), true
}

// FirstCandidate says whether model's first candidate is tunnelled and its
// tool mode (for labelling requests refused before a lease), or false for
// an unknown model or one without candidates.
func (d *Dispatcher) FirstCandidate(model string) (tunnel bool, toolMode iop.ToolMode, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.models[model]
	if m == nil || len(m.cands) == 0 {
		return false, iop.ToolMode_TOOL_MODE_UNSPECIFIED, false
	}
	r := m.cands[0].res
	return r.tunnels(), r.spec.WireToolMode(), true
}

// Capabilities returns what node id's adapter instances declared they can
// serve, by provider name (empty before the node ever reported).
func (d *Dispatcher) Capabilities(id string) map[string]*iop.AdapterCapabilities {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]*iop.AdapterCapabilities{}
	if n := d.nodes[id]; n != nil {
		for k, v := range n.caps {
			out[k] = v
		}
	}
	return out
}
