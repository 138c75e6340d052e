package dispatch

import "github.com/iop-gateway/iop/config"

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
