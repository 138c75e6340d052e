package dispatch

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// pollHealth asks every ready node for its providers' snapshots each
// interval and records the backend health they report. It is advisory: a
// failed poll changes nothing (the heartbeat owns liveness).
func (d *Dispatcher) pollHealth(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range d.readyNodes() {
			ctx, cancel := context.WithTimeout(d.ctx, interval)
			resp, err := d.NodeCommand(ctx, id, "providers")
			cancel()
			if err != nil {
				if d.ctx.Err() == nil {
					d.log.Debug("health poll failed", zap.String("node_id", id), zap.Error(err))
				}
				continue
			}
			health := map[string]string{}
			for _, p := range resp.GetProviders() {
				health[p.GetProviderId()] = p.GetHealth()
			}
			d.setHealth(id, health)
		}
	}
}

func (d *Dispatcher) readyNodes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id, n := range d.nodes {
		if n.state == stateReady {
			out = append(out, id)
		}
	}
	return out
}

// setHealth records reported health for node id's providers; a provider
// that comes back from offline hands its slots to waiters at once.
func (d *Dispatcher) setHealth(id string, health map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[id]
	if n == nil || n.state != stateReady {
		return
	}
	for name, h := range health {
		r := n.resources[name]
		if r == nil || !r.live || r.health == h {
			continue
		}
		was := r.health
		r.health = h
		if was == "" && h == "ok" {
			continue // the first report of a healthy backend is not news
		}
		d.log.Info("provider health changed", zap.String("node_id", id), zap.String("provider", name), zap.String("from", was), zap.String("to", h))
		if was == "offline" {
			d.pumpLocked(r)
		}
	}
}
