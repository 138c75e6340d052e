package dispatch

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch/route"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
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
			d.setHealth(id, resp.GetProviders())
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

// healthNames is the one mapping of health states to the status API's
// names. Unknown shows as ok: a backend not yet probed is dispatched to.
var healthNames = map[iop.HealthState]string{
	iop.HealthState_HEALTH_STATE_UNSPECIFIED: "ok",
	iop.HealthState_HEALTH_STATE_OK:          "ok",
	iop.HealthState_HEALTH_STATE_DEGRADED:    "degraded",
	iop.HealthState_HEALTH_STATE_OFFLINE:     "offline",
}

// HealthName is the status API's name of a health state.
func HealthName(h iop.HealthState) string {
	if n, ok := healthNames[h]; ok {
		return n
	}
	return "ok"
}

// setHealth records reported health for node id's providers; a provider
// that comes back from offline hands its slots to waiters at once.
//
// It also records each provider's backend load (running and waiting
// requests, KV-cache usage), which load-aware routing reads.
func (d *Dispatcher) setHealth(id string, snaps []*iop.ProviderSnapshot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[id]
	if n == nil || n.state != stateReady {
		return
	}
	now := time.Now()
	for _, s := range snaps {
		name, h := s.GetProviderId(), s.GetHealth()
		r := n.resources[name]
		if r == nil || !r.live {
			continue
		}
		r.load = route.Load{Known: true, Running: s.GetBackendRunning(), Waiting: s.GetBackendWaiting(), KVUsage: s.GetKvCacheUsage()}
		r.loadAt = now
		if r.health == h {
			continue
		}
		was := r.health
		r.health = h
		if was == iop.HealthState_HEALTH_STATE_UNSPECIFIED && h == iop.HealthState_HEALTH_STATE_OK {
			continue // the first report of a healthy backend is not news
		}
		d.log.Info("provider health changed", zap.String("node_id", id), zap.String("provider", name), zap.String("from", HealthName(was)), zap.String("to", HealthName(h)))
		if was == iop.HealthState_HEALTH_STATE_OFFLINE {
			d.pumpLocked(r)
		}
	}
}

// healthState reads a status API health name back (HealthName's inverse;
// "ok" reads as OK).
func healthState(name string) iop.HealthState {
	for h, n := range healthNames {
		if n == name && h != iop.HealthState_HEALTH_STATE_UNSPECIFIED {
			return h
		}
	}
	return iop.HealthState_HEALTH_STATE_UNSPECIFIED
}
