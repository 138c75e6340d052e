package dispatch

import (
	"context"
	"time"

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
	old := d.cfg
	var changed []string
	for i := range cfg.Nodes {
		spec := &cfg.Nodes[i]
		n := d.nodes[spec.ID]
		if n == nil || n.state != stateReady {
			continue
		}
		prev := old.Node(spec.ID)
		if prev == nil || NodePayload(prev).GetConfigVersion() != NodePayload(spec).GetConfigVersion() {
			changed = append(changed, spec.ID)
		}
	}
	d.applyConfigLocked(cfg)
	return changed
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
// every affected ready node, one at a time, each bounded by perNode. It
// reports each node's result.
func (d *Dispatcher) ReloadAndRefresh(ctx context.Context, cfg *config.Edge, perNode time.Duration) map[string]string {
	out := map[string]string{}
	for _, id := range d.Reload(cfg) {
		rctx, cancel := context.WithTimeout(ctx, perNode)
		resp, err := d.RefreshNode(rctx, id)
		cancel()
		out[id] = RefreshResult(resp, err)
	}
	return out
}
