package dispatch

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/route"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// nodeState is a configured Node's lifecycle state. The only transitions are
// the ones in transitionLocked.
type nodeState uint8

const (
	// stateOffline: no connection owns the node id.
	stateOffline nodeState = iota
	// statePending: an accepted registration owns the id; not dispatchable.
	statePending
	// stateReady: the owner acknowledged ready; its resources are live.
	stateReady
)

func (s nodeState) String() string {
	switch s {
	case statePending:
		return "pending"
	case stateReady:
		return "ready"
	default:
		return "offline"
	}
}

// lifecycleKind is what happened to a connection.
type lifecycleKind uint8

const (
	evRegister   lifecycleKind = iota + 1 // an accepted registration
	evReady                               // the connection sent NodeReadyRequest: decide only
	evActivate                            // its ready=true answer was written: activate
	evApplied                             // the ready node applied the edge's current config (refresh APPLIED)
	evClosed                              // the connection closed or timed out
	evConfigured                          // the edge's config changed: providers it no longer lists retire, restored ones the ready node runs go live
)

// node is the registry entry of one configured Node id.
type node struct {
	id          string
	tokenDigest [32]byte
	state       nodeState
	// owner is the connection that currently owns the id (pending or ready);
	// nil when offline.
	owner *nodewire.Conn
	// gen is the owner's connection generation. It only grows; it never
	// leaves the Edge.
	gen uint64
	// resources are this node's provider resources, by provider name.
	resources map[string]*resource
	// running is the config the node's current session runs: the payload
	// of its accepted registration, replaced only when the node answers a
	// refresh APPLIED. Nil while no session exists. Resources follow it,
	// not the edge's newest config, so the edge never routes by a config
	// the node does not run.
	running *config.NodeSpec
	// runningUnsure is set when a refresh to the current session went
	// unanswered (a timeout: the node may still apply it) or its APPLIED
	// answer was dropped because a newer config replaced the pushed one:
	// the session may run something other than running, so the next
	// reload pushes to it whatever the versions say. Cleared whenever
	// running is set.
	runningUnsure bool
	// caps is what each adapter instance of the running config declared it
	// can serve (by provider name), from the node's ready request or its
	// last applied refresh. Kept while the node is away: it is the best
	// knowledge of what the provider will serve when it comes back.
	caps map[string]*iop.AdapterCapabilities
	// lastLoad is when the owner's last accepted load report arrived (zero:
	// none from this session).
	lastLoad time.Time
	// draining is set when the owner's ready request said the node was
	// already draining (NodeReadyRequest.draining): its providers go live
	// as draining, so nothing is granted there even before its first load
	// report. Also set when a reload removes providers while the live
	// ones are reported draining, so that the drain is not forgotten with
	// them (drainingLocked), and by any report that says draining: a
	// drain is one-way for a session (the node never stops draining), so
	// a later report reads as draining (observeLocked). Cleared when a new
	// registration takes the id or the session ends; a later session says
	// again.
	draining bool
}

// outcome reports what a transition decided, for the caller to act on after
// the lock is released (I/O, logs).
type outcome struct {
	ready      bool   // evReady: the answer
	reason     string // evReady refused: why
	activated  bool   // evReady: first transition (resources activated)
	superseded *nodewire.Conn
	closeOld   bool // the superseded owner was ready: close it now
	fenced     bool // a ready generation was fenced
}

// transitionLocked is the registry's one transition function. Every
// correctness step of the lifecycle (ownership, generation fencing, lease
// return, resource (de)activation, queue pumping) happens here, under d.mu,
// in the same step; events and metrics are only reported from it.
//
// why is the reason the lifecycle events of this step carry (evClosed:
// why the connection ended, e.g. "heartbeat timeout"); "" for none.
func (d *Dispatcher) transitionLocked(n *node, kind lifecycleKind, c *nodewire.Conn, why string) outcome {
	var out outcome
	switch kind {
	case evRegister:
		if n.owner != nil {
			// A newer registration of the same id supersedes the older
			// connection and fences its generation in this same step.
			out.superseded = n.owner
			d.connNode[n.owner] = nil
			if n.state == stateReady {
				d.fenceLocked(n, "superseded")
				out.closeOld, out.fenced = true, true
			}
			d.metrics.sessions(n.id, "superseded")
			d.publish(Event{Type: EventNodeSuperseded, NodeID: n.id, Reason: "a newer registration of the same node id"})
		}
		d.genCounter++
		n.owner, n.gen, n.state, n.draining = c, d.genCounter, statePending, false
		// The server keeps the newest of two connections waiting for
		// their ready by this order, whatever order their answers'
		// writes end in.
		c.SetRegisterOrder(d.genCounter)
		d.connNode[c] = n
		// The registration answer carries the edge's current config.
		d.setRunningLocked(n, d.cfg.Node(n.id))
	case evReady:
		// The answer is written before anything is activated (evActivate):
		// if the node never hears it, nothing was dispatched to it.
		switch {
		case n.owner != c:
			out.reason = "stale or superseded connection"
		case n.state == stateReady, n.state == statePending:
			out.ready = true // for a ready owner: a duplicate, answered the same
		default:
			out.reason = "connection is not pending"
		}
	case evActivate:
		if n.owner != c || n.state != statePending {
			return out // superseded meanwhile, or a duplicate: nothing to do
		}
		n.state = stateReady
		out.activated = true
		d.activateLocked(n)
		d.metrics.sessions(n.id, "ready")
		d.publish(Event{Type: EventNodeConnected, NodeID: n.id})
	case evApplied:
		if n.owner != c || n.state != stateReady {
			return out // gone or superseded meanwhile
		}
		// The node runs the edge's current config now: resources take its
		// values, providers it added go live, larger capacities pump.
		d.setRunningLocked(n, d.cfg.Node(n.id))
		d.failStrandedLocked()
		d.activateLocked(n)
	case evClosed:
		if n.owner != c {
			return out // a stale connection's callback changes nothing
		}
		if n.state == stateReady {
			d.fenceLocked(n, "lost")
			out.fenced = true
			d.metrics.sessions(n.id, "lost")
			d.publish(Event{Type: EventNodeDisconnected, NodeID: n.id, Reason: why})
		}
		n.owner, n.state, n.draining = nil, stateOffline, false
		// Without a session the node runs nothing; its next registration
		// gets the current config.
		d.setRunningLocked(n, nil)
	case evConfigured:
		// A provider the edge's config no longer lists (every provider of
		// a node it no longer lists) goes offline and leaves: its leases
		// return (node_lost: the exchange cannot be trusted to end well on
		// a provider the node is about to drop) and nothing waits for it.
		// A drain its providers reported outlives them: providers added
		// later go live draining (liveLocked).
		n.draining = drainingLocked(n)
		spec := d.cfg.Node(n.id)
		for name, r := range n.resources {
			if spec != nil && spec.Provider(name) != nil {
				continue
			}
			for l := range r.leases {
				d.releaseLocked(l, ReasonNodeLost)
			}
			r.live, r.downSince = false, time.Now()
			delete(d.resources, r.key)
			delete(n.resources, name)
		}
		// A provider the config lists again that the ready session still
		// runs (a reload dropped it, another restored it before the node
		// applied the drop) goes live now: the node's config is unchanged,
		// so no refresh answer would ever activate it. The caller pumps.
		if n.state == stateReady {
			d.liveLocked(n)
		}
	}
	// A provider this step took away (fenced, removed) leaves its pinned
	// waiters to any candidate. Not in a reload's own steps (evConfigured,
	// the close of a node the new config drops): the models still have
	// their old candidates then, which the pump would grant; the reload
	// unpins once they are rebuilt (failStrandedLocked).
	if kind != evConfigured && d.cfg.Node(n.id) != nil {
		d.unpinStaleLocked()
	}
	return out
}

// Register implements nodewire.ServerHandler.
func (d *Dispatcher) Register(c *nodewire.Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
	reject := func(code iop.RejectCode, reason string) *iop.RegisterResponse {
		d.log.Info("node registration rejected", zap.String("node_id", nodewire.LoggableNodeID(req.GetNodeId())), zap.Stringer("code", code))
		d.mu.Lock()
		// The event names a configured node only: an unknown id is the
		// peer's own text and stays out of the status page.
		id := ""
		if n := d.nodes[req.GetNodeId()]; n != nil {
			d.metrics.sessions(n.id, "rejected")
			id = n.id
		}
		d.publish(Event{Type: EventNodeRejected, NodeID: id, Reason: rejectReason(code)})
		d.mu.Unlock()
		return &iop.RegisterResponse{Accepted: false, Reason: reason, RejectCode: code, ProtocolVersion: nodewire.ProtocolVersion}
	}
	if req.GetProtocolVersion() != nodewire.ProtocolVersion {
		return reject(iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION,
			fmt.Sprintf("protocol version %d is not supported (edge speaks %d)", req.GetProtocolVersion(), nodewire.ProtocolVersion))
	}
	if d.ctx.Err() != nil {
		return reject(iop.RejectCode_REJECT_CODE_UNAVAILABLE, "edge is shutting down")
	}
	d.mu.Lock()
	n := d.nodes[req.GetNodeId()]
	if n == nil {
		d.mu.Unlock()
		return reject(iop.RejectCode_REJECT_CODE_UNKNOWN_NODE, "node id is not configured")
	}
	// Compare fixed-size digests so neither the comparison's time nor its
	// length check says anything about the configured token.
	got := sha256.Sum256([]byte(req.GetToken()))
	if subtle.ConstantTimeCompare(got[:], n.tokenDigest[:]) != 1 {
		d.mu.Unlock()
		return reject(iop.RejectCode_REJECT_CODE_CREDENTIALS, "invalid node token")
	}
	out := d.transitionLocked(n, evRegister, c, "")
	payload := NodePayload(d.cfg.Node(n.id))
	d.mu.Unlock()

	if out.superseded != nil {
		d.log.Info("node connection superseded", zap.String("node_id", n.id), zap.Bool("was_ready", out.closeOld))
		if out.closeOld {
			// Owner: this call. Close waits for the old connection's
			// goroutines, which never wait on the dispatcher lock.
			go func() { _ = out.superseded.Close() }()
		}
	}
	d.log.Info("node registered (pending)", zap.String("node_id", n.id))
	return &iop.RegisterResponse{Accepted: true, NodeId: n.id, Config: payload, ProtocolVersion: nodewire.ProtocolVersion}
}

// Ready implements nodewire.ServerHandler.
func (d *Dispatcher) Ready(c *nodewire.Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse {
	d.mu.Lock()
	n := d.connNode[c]
	if n == nil || n.id != req.GetNodeId() {
		d.mu.Unlock()
		d.log.Info("node ready refused", zap.String("node_id", nodewire.LoggableNodeID(req.GetNodeId())), zap.String("reason", "stale connection"))
		return &iop.NodeReadyResponse{Ready: false, Reason: "stale, superseded or unknown connection for this node id"}
	}
	out := d.transitionLocked(n, evReady, c, "")
	switch {
	case out.ready && n.state == statePending:
		// What the node says it can serve applies from its activation on,
		// and so does its drain: a connect attempt that was under way when
		// the node began to drain goes live draining (activateLocked).
		d.setCapsLocked(n, req.GetAdapters())
		n.draining = req.GetDraining()
	case out.ready && req.GetDraining() && !n.draining:
		// A repeated ready of the ready owner that says it drains now:
		// taken as a draining load report is.
		n.draining = true
		loads := make([]*iop.ProviderLoad, 0, len(n.resources))
		for name := range n.resources {
			loads = append(loads, &iop.ProviderLoad{ProviderId: name, Health: iop.HealthState_HEALTH_STATE_DRAINING})
		}
		d.observeLocked(n, loads, time.Now())
	}
	d.mu.Unlock()
	if !out.ready {
		d.log.Info("node ready refused", zap.String("node_id", n.id), zap.String("reason", out.reason))
		return &iop.NodeReadyResponse{Ready: false, Reason: out.reason}
	}
	return &iop.NodeReadyResponse{Ready: true}
}

// Activate implements nodewire.ServerHandler: c's ready answer was
// written, so its node becomes dispatch-ready (resources live, stranded
// waiters pumped, node.connected).
func (d *Dispatcher) Activate(c *nodewire.Conn) {
	d.mu.Lock()
	n := d.connNode[c]
	var out outcome
	push, draining := false, false
	if n != nil {
		out = d.transitionLocked(n, evActivate, c, "")
		draining = n.draining
		// A reload while the node was pending could not push to it (only
		// ready nodes are refreshed): it went ready running the config its
		// registration answer carried, and no later step would push the
		// current one. The Add happens under the lock, before Close can
		// take it and wait.
		if out.activated && d.ctx.Err() == nil && d.staleLocked(n) {
			push = true
			d.wg.Add(1)
		}
	}
	d.mu.Unlock()
	if out.activated {
		d.log.Info("node ready", zap.String("node_id", n.id), zap.Bool("draining", draining))
	}
	if push {
		// Owner: the Dispatcher (Close waits for d.wg). Stops when the
		// node answers, after staleRefreshTimeout, or when Close cancels
		// d.ctx.
		go func() {
			defer d.wg.Done()
			d.pushStale(n.id, c)
		}()
	}
}

// Closed implements nodewire.ServerHandler.
func (d *Dispatcher) Closed(c *nodewire.Conn, err error) {
	d.mu.Lock()
	n := d.connNode[c]
	delete(d.connNode, c)
	var out outcome
	why := closeReason(err)
	if n != nil {
		out = d.transitionLocked(n, evClosed, c, why)
	}
	d.mu.Unlock()
	if !out.fenced {
		return
	}
	if closedByEdge(err) || d.ctx.Err() != nil {
		// The edge's own doing (a shutdown, a superseded session): the
		// socket's "use of closed network connection" is no error.
		d.log.Info("node disconnected", zap.String("node_id", n.id), zap.String("reason", why))
		return
	}
	d.log.Info("node disconnected", zap.String("node_id", n.id), zap.String("reason", why), zap.Error(err))
}

// closedByEdge reports whether a connection's close cause is this edge
// closing it: a local Close (nodewire.ErrClosed) or a read on a socket the
// edge closed under it (net.ErrClosed, as the server's Close does).
func closedByEdge(err error) bool {
	return errors.Is(err, nodewire.ErrClosed) || errors.Is(err, net.ErrClosed)
}

// fenceQueuedWalk is how many queued frames one fence decodes at most
// from the first of its exchanges' unread ones, all exchanges together
// (each also decodes its last): a few milliseconds of d.mu.
const fenceQueuedWalk = 1024

// fenceLocked ends the ready generation of n: every lease on its resources
// returns with reason node_lost (exactly once: later Release calls are
// no-ops; a lease whose exchange already ended returns with the reason
// its terminal or its holder gave, Lease.settled), the resources go
// offline, and waiters are re-evaluated against the remaining live
// candidates (they keep waiting for a reconnect up to their
// timeout when none has room).
func (d *Dispatcher) fenceLocked(n *node, why string) {
	leases := 0
	for _, r := range n.resources {
		leases += len(r.leases)
	}
	// The frames the fence decodes from the first of each exchange's
	// unread ones, shared out: a node lost with a thousand lagging
	// exchanges would otherwise cost a thousand full walks under d.mu.
	// Each still looks at its last frame, where an honest node's
	// terminal is.
	walk := fenceQueuedWalk / max(leases, 1)
	for _, r := range n.resources {
		for l := range r.leases {
			d.releaseLocked(l, l.fenceReason(walk))
		}
		if r.live {
			r.downSince = time.Now()
		}
		r.live, r.conn = false, nil
	}
	// The next session's first load report is taken whenever it comes.
	n.lastLoad = time.Time{}
	_ = why
}

// activateLocked makes n's resources that are not live yet (all of them at
// the ready transition; those a refresh added later) live for its current
// generation, and hands free slots to waiters at once.
func (d *Dispatcher) activateLocked(n *node) {
	d.liveLocked(n)
	for _, r := range n.resources {
		d.pumpLocked(r)
	}
}

// liveLocked makes n's resources that are not live yet and that the
// config n runs has live for its current generation, without pumping.
func (d *Dispatcher) liveLocked(n *node) {
	draining := drainingLocked(n)
	for _, r := range n.resources {
		if !r.onNode || r.live {
			continue // not in the config the node runs, or already live
		}
		r.live, r.gen, r.conn = true, n.gen, n.owner
		r.inFlight, r.longInFlight, r.health = 0, 0, iop.HealthState_HEALTH_STATE_UNSPECIFIED
		if draining {
			// The node drains: nothing is granted here from the first
			// moment (no pump hands it a waiter), and the status shows it
			// draining.
			r.health = iop.HealthState_HEALTH_STATE_DRAINING
		}
		// Figures reported before it was live (another session's, or from
		// before it went offline) describe no backend this session runs.
		r.load, r.loadAt = route.Load{}, time.Time{}
	}
}

// drainingLocked reports whether n's session drains: its ready said so,
// or it reported a live provider draining. A drain is the whole node's
// (a node reports every provider draining or none), so a provider a
// refresh adds, or a reload restores, while the others drain goes live
// draining rather than taking work until the node's next report.
func drainingLocked(n *node) bool {
	if n.draining {
		return true
	}
	for _, r := range n.resources {
		if r.live && r.health == iop.HealthState_HEALTH_STATE_DRAINING {
			return true
		}
	}
	return false
}

// nodeConn returns the ready owner of node id.
func (d *Dispatcher) nodeConn(id string) (*nodewire.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[id]
	if n == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, id)
	}
	if n.state != stateReady {
		return nil, fmt.Errorf("%w: %s is %s", ErrNodeNotReady, id, n.state)
	}
	return n.owner, nil
}

func (d *Dispatcher) publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	d.bus.Publish(e)
	d.recordEvent(e)
}

// rejectReason is a refused registration's event reason (never the token).
func rejectReason(code iop.RejectCode) string {
	switch code {
	case iop.RejectCode_REJECT_CODE_CREDENTIALS:
		return "invalid node token"
	case iop.RejectCode_REJECT_CODE_UNKNOWN_NODE:
		return "unknown node id"
	case iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION:
		return "unsupported protocol version"
	case iop.RejectCode_REJECT_CODE_UNAVAILABLE:
		return "edge shutting down"
	}
	return "rejected"
}

// closeReason says in a few fixed words why a node's connection ended
// (event reasons: no addresses or OS error text).
func closeReason(err error) string {
	switch {
	case err == nil:
		return "connection closed"
	case errors.Is(err, nodewire.ErrHeartbeatTimeout):
		return "heartbeat timeout"
	case closedByEdge(err):
		return "closed by the edge"
	case errors.Is(err, nodewire.ErrProtocol):
		return "protocol violation"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "node stopped reading"
	case errors.Is(err, io.EOF):
		return "closed by the node"
	}
	return "connection lost"
}

// setCapsLocked records what n's adapter instances declared and gives each
// resource its own declaration (nil: none reported).
func (d *Dispatcher) setCapsLocked(n *node, caps []*iop.AdapterCapabilities) {
	n.caps = make(map[string]*iop.AdapterCapabilities, len(caps))
	for _, c := range caps {
		n.caps[c.GetAdapter()] = c
	}
	for name, r := range n.resources {
		r.caps = n.caps[name]
	}
}
