package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Reload swaps in cfg (already normalized) atomically with respect to
// leases and queues: live state of surviving nodes, resources and models is
// kept, removed ones go offline (their leases return as node_lost), token
// changes apply to the next registration. It returns the ready nodes whose
// NodeConfigPayload changed, which need a refresh push.
func (d *Dispatcher) Reload(cfg *config.Edge) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applyConfigLocked(cfg)
	// Every ready node that does not run the new config needs a push,
	// including one whose earlier refresh failed.
	var changed []string
	for i := range cfg.Nodes {
		spec := &cfg.Nodes[i]
		n := d.nodes[spec.ID]
		if n != nil && n.state == stateReady && d.staleLocked(n) {
			changed = append(changed, spec.ID)
		}
	}
	return changed
}

// staleLocked reports whether n's session runs (or may run) a config
// other than the edge's current one for it.
func (d *Dispatcher) staleLocked(n *node) bool {
	desired := d.cfg.Node(n.id)
	if n.running == nil || desired == nil {
		return false
	}
	if n.runningUnsure {
		return true
	}
	// Loaded specs are never changed in place: the same one is the same
	// config, without hashing either.
	return n.running != desired && NodePayload(n.running).GetConfigVersion() != NodePayload(desired).GetConfigVersion()
}

// staleRefreshTimeout bounds the push of the current config to a node
// that went ready running one a reload replaced (see Activate), as a
// reload bounds each of its pushes.
const staleRefreshTimeout = 15 * time.Second

// pushStale pushes the current config to nodeID's session c, which went
// ready running a replaced one. A failed push leaves the session marked
// as running an unknown config (RefreshNode), so the next reload pushes
// again.
func (d *Dispatcher) pushStale(nodeID string, c *nodewire.Conn) {
	ctx, cancel := context.WithTimeout(d.ctx, staleRefreshTimeout)
	defer cancel()
	resp, err := d.refreshOn(ctx, nodeID, c)
	if d.ctx.Err() != nil {
		return // shutting down: nothing to report
	}
	if err != nil {
		d.log.Warn("node went ready running a replaced config; the push of the current one failed",
			zap.String("node_id", nodeID), zap.String("code", NodeErrorCode(err)))
		return
	}
	d.log.Info("node went ready running a replaced config; the current one was pushed",
		zap.String("node_id", nodeID), zap.String("result", RefreshResult(resp, nil)))
}

// RefreshResult names a refresh outcome the way the admin API shows it:
// applied, restart_required, failed, or "error: …" when the node could not
// be reached.
func RefreshResult(resp *iop.NodeConfigRefreshResponse, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	switch resp.GetStatus() {
	case iop.RefreshStatus_REFRESH_STATUS_APPLIED:
		return "applied"
	case iop.RefreshStatus_REFRESH_STATUS_RESTART_REQUIRED:
		return "restart_required"
	default:
		return "failed"
	}
}

// ReloadAndRefresh swaps in cfg (see Reload) and pushes the new config to
// every affected ready node (see RefreshNodes). It reports each node's
// result.
func (d *Dispatcher) ReloadAndRefresh(ctx context.Context, cfg *config.Edge, perNode time.Duration) map[string]string {
	return d.RefreshNodes(ctx, d.Reload(cfg), perNode)
}

// maxParallelRefreshes bounds the refreshes RefreshNodes has in flight:
// one at a time, a reload touching many silent nodes took perNode times
// their number (an hour for 240 nodes at 15 s), while the reload lock
// held every later reload back.
const maxParallelRefreshes = 16

// RefreshNodes pushes the current config to each of ids (see RefreshNode),
// up to maxParallelRefreshes at once, each bounded by perNode, and reports
// each node's result. It returns when every push has ended.
func (d *Dispatcher) RefreshNodes(ctx context.Context, ids []string, perNode time.Duration) map[string]string {
	out := make(map[string]string, len(ids))
	var (
		mu  sync.Mutex // guards out
		wg  sync.WaitGroup
		sem = make(chan struct{}, maxParallelRefreshes)
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		// Owner: this call, which waits for it; ends when the push is
		// answered or perNode (or ctx) ends.
		go func() {
			defer func() { <-sem; wg.Done() }()
			rctx, cancel := context.WithTimeout(ctx, perNode)
			resp, err := d.RefreshNode(rctx, id)
			cancel()
			mu.Lock()
			out[id] = RefreshResult(resp, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// RefreshNode pushes the edge's current config for nodeID to it (a ready
// node only) and acts on the answer so that the edge and the node never
// disagree on what the node runs:
//
//   - APPLIED: the node runs the new config; its resources switch to it in
//     one step (new providers go live, changed capacities and types apply).
//   - RESTART_REQUIRED: the node can only run it from a new session; the
//     edge fences the current generation (its leases return as node_lost)
//     and closes the connection; the node re-registers and gets the new
//     config in its registration answer.
//   - FAILED (or no answer): the node keeps its old config, and so does the
//     edge for that node: /admin/status shows the two versions.
func (d *Dispatcher) RefreshNode(ctx context.Context, nodeID string) (*iop.NodeConfigRefreshResponse, error) {
	conn, err := d.nodeConn(nodeID)
	if err != nil {
		return nil, err
	}
	return d.refreshOn(ctx, nodeID, conn)
}

// refreshOn is RefreshNode on nodeID's session conn. The answer is acted
// on for that session: should it end and the node register anew
// meanwhile, the new session already got the config in its registration
// answer.
func (d *Dispatcher) refreshOn(ctx context.Context, nodeID string, conn *nodewire.Conn) (*iop.NodeConfigRefreshResponse, error) {
	d.mu.Lock()
	spec := d.cfg.Node(nodeID)
	d.mu.Unlock()
	if spec == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, nodeID)
	}
	payload := NodePayload(spec)
	env, err := requestOn(ctx, conn, &iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshRequest{
		NodeConfigRefreshRequest: &iop.NodeConfigRefreshRequest{Config: payload},
	}})
	if err != nil {
		// The push may have reached the node and be applied after all
		// (a timeout): what it runs is no longer known.
		d.unsure(nodeID, conn)
		return nil, err
	}
	resp := env.GetNodeConfigRefreshResponse()
	if resp == nil {
		return nil, fmt.Errorf("%w: want NodeConfigRefreshResponse, got %T", nodewire.ErrProtocol, env.Body)
	}
	switch resp.GetStatus() {
	case iop.RefreshStatus_REFRESH_STATUS_APPLIED:
		d.applied(nodeID, conn, spec, resp.GetAdapters())
	case iop.RefreshStatus_REFRESH_STATUS_RESTART_REQUIRED:
		d.restartNode(nodeID, conn)
	default:
		d.log.Warn("node refused the new config; it keeps its old one", zap.String("node_id", nodeID),
			zap.String("config_version", payload.GetConfigVersion()))
	}
	return resp, nil
}

// applied records that nodeID's session conn now runs spec, through the
// registry's transition function.
func (d *Dispatcher) applied(nodeID string, conn *nodewire.Conn, spec *config.NodeSpec, caps []*iop.AdapterCapabilities) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[nodeID]
	if n == nil || n.owner != conn {
		return // gone, or a newer session (its registration carried the config)
	}
	if d.cfg.Node(nodeID) != spec {
		// Another reload replaced the config meanwhile: the node runs
		// neither the edge's config nor, perhaps, the one recorded as
		// running (that reload compared against it). The next reload
		// pushes again.
		n.runningUnsure = true
		return
	}
	if caps != nil {
		d.setCapsLocked(n, caps)
	}
	d.transitionLocked(n, evApplied, n.owner, "")
}

// unsure records that nodeID's session conn may run a config other than
// the one recorded (see node.runningUnsure).
func (d *Dispatcher) unsure(nodeID string, conn *nodewire.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.nodes[nodeID]; n != nil && n.owner == conn {
		n.runningUnsure = true
	}
}

// restartNode ends nodeID's session c so that it re-registers and
// receives the current config: the generation is fenced in this step. A
// newer session is left alone: it registered with the current config.
func (d *Dispatcher) restartNode(nodeID string, c *nodewire.Conn) {
	d.mu.Lock()
	n := d.nodes[nodeID]
	if n == nil || n.owner == nil || n.owner != c {
		d.mu.Unlock()
		return
	}
	d.transitionLocked(n, evClosed, c, "restarting its session for a new config")
	delete(d.connNode, c)
	d.mu.Unlock()
	d.log.Info("node restarts its session for the new config", zap.String("node_id", nodeID))
	// Owner: none needed; Close is bounded (it waits only for the
	// connection's own goroutines).
	go func() { _ = c.Close() }()
}
