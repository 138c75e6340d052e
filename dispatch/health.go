package dispatch

import (
	"context"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch/route"
	"github.com/iop-gateway/iop/internal/healthname"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// pollHealth asks every ready node for its providers' snapshots each
// interval and records the backend health they report. It is advisory: a
// failed poll changes nothing (the heartbeat owns liveness). The nodes are
// asked at once, each poll bounded by the interval, so a node slow to
// answer (or not answering) delays no other node's report, and a round
// never lasts longer than one interval whatever the number of nodes.
func (d *Dispatcher) pollHealth(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		// One goroutine per ready node (bounded by the configured nodes);
		// the next round starts only after this one ends.
		for id, c := range d.pollNodes(interval) {
			wg.Add(1)
			// Owner: pollHealth. Stops when the node answers, the poll's
			// deadline (one interval) passes, or Close cancels d.ctx.
			go func() {
				defer wg.Done()
				d.pollNode(id, c, interval)
			}()
		}
		wg.Wait()
	}
}

// pollNode asks node id's session c for its providers' snapshots, waiting
// at most timeout, and records them.
func (d *Dispatcher) pollNode(id string, c *nodewire.Conn, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	resp, err := nodeCommandOn(ctx, c, "providers")
	cancel()
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Debug("health poll failed", zap.String("node_id", id), zap.Error(err))
		}
		return
	}
	if testHookPolled != nil {
		testHookPolled()
	}
	d.setHealth(id, c, resp.GetProviders())
}

// testHookPolled, when set (by tests only, before the dispatcher starts),
// runs in pollHealth between a node's answer and its recording.
var testHookPolled func()

// pollNodes lists the ready nodes to poll, with their ready sessions:
// those whose pushed load reports have not been seen for three poll
// intervals (reports off, or an older node).
func (d *Dispatcher) pollNodes(interval time.Duration) map[string]*nodewire.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]*nodewire.Conn{}
	now := time.Now()
	for id, n := range d.nodes {
		if n.state == stateReady && now.Sub(n.lastLoad) > 3*interval {
			out[id] = n.owner
		}
	}
	return out
}

// HealthName is the status API's name of a health state (healthname.Of,
// which the node's providers command renders by too).
func HealthName(h iop.HealthState) string { return healthname.Of(h) }

// setHealth records the health and load of node id's providers from a
// providers command its session c answered (nodes that send no load
// reports). The answer of a session that no longer owns the node (a newer
// generation registered meanwhile) changes nothing. Only as many
// snapshots as the node has providers are converted (as many as
// observeLocked looks at): a longer answer costs no more than that.
func (d *Dispatcher) setHealth(id string, c *nodewire.Conn, snaps []*iop.ProviderSnapshot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[id]
	if n == nil || n.owner != c || n.state != stateReady {
		return
	}
	snaps = snaps[:min(len(snaps), len(n.resources))]
	loads := make([]*iop.ProviderLoad, 0, len(snaps))
	for _, s := range snaps {
		loads = append(loads, &iop.ProviderLoad{ProviderId: s.GetProviderId(), Health: s.GetHealth(),
			Running: s.GetBackendRunning(), Waiting: s.GetBackendWaiting(), KvCacheUsage: s.GetKvCacheUsage()})
	}
	d.observeLocked(n, loads, time.Now())
}

// Load implements nodewire.LoadReceiver: a ready node's pushed report.
// Reports from a connection that does not own its node, or faster than
// half the configured interval, are ignored.
func (d *Dispatcher) Load(c *nodewire.Conn, r *iop.LoadReport) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.connNode[c]
	if n == nil || n.owner != c || n.state != stateReady {
		return
	}
	now := time.Now()
	if every := n.running.LoadReportInterval(); (every <= 0 || now.Sub(n.lastLoad) < every/2) && !drainsLocked(n, r.GetProviders()) {
		return
	}
	n.lastLoad = now
	d.observeLocked(n, r.GetProviders(), now)
}

// drainsLocked reports whether loads say that a live provider of n not
// yet draining now is: a node that begins to drain reports it at once,
// whatever its report interval (and when reports are off), and that
// report must be taken in at once for nothing more to be sent there. A
// node cannot use it to report faster: each provider starts to drain once
// a session (a report turning it back counts against the interval).
func drainsLocked(n *node, loads []*iop.ProviderLoad) bool {
	for _, l := range loads[:min(len(loads), len(n.resources))] {
		if l.GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING {
			continue
		}
		if r := n.resources[l.GetProviderId()]; r != nil && r.live && r.health != iop.HealthState_HEALTH_STATE_DRAINING {
			return true
		}
	}
	return false
}

// unservable reports whether a provider's reported health rules out
// dispatching to it: its backend is down, or its node is draining.
func unservable(h iop.HealthState) bool {
	return h == iop.HealthState_HEALTH_STATE_OFFLINE || h == iop.HealthState_HEALTH_STATE_DRAINING
}

// observeLocked records reported health and load for n's providers (at
// most one entry per provider is looked at); a provider that comes back
// from offline hands its slots to waiters at once.
func (d *Dispatcher) observeLocked(n *node, loads []*iop.ProviderLoad, now time.Time) {
	if len(loads) > len(n.resources) {
		loads = loads[:len(n.resources)]
	}
	// Pinned waiters of a provider the report makes unservable wait for
	// any candidate; they are unpinned (and pumped) once the whole report
	// is taken: another provider it drains must not serve them first. A
	// provider it brings back is pumped after that, so that its slots go
	// to the first waiters, those just unpinned included, not to younger
	// ones while the older still wait for a provider this report took.
	unpin := false
	var back []*resource
	for _, l := range loads {
		name, h := l.GetProviderId(), l.GetHealth()
		r := n.resources[name]
		if r == nil || !r.live {
			continue
		}
		// A drain is one-way for a session: once it said so (its ready,
		// or any report), every later report reads as draining, so that
		// an answer the node gave before it began to drain, arriving
		// after, sets nothing healthy again. A backend reported down
		// stays down.
		if h == iop.HealthState_HEALTH_STATE_DRAINING {
			n.draining = true
		} else if n.draining && h != iop.HealthState_HEALTH_STATE_OFFLINE {
			h = iop.HealthState_HEALTH_STATE_DRAINING
		}
		r.load = route.Load{Known: true, Running: figure(l.GetRunning()), Waiting: figure(l.GetWaiting()), KVUsage: min(figure(l.GetKvCacheUsage()), 1)}
		r.loadAt = now
		if r.health == h {
			continue
		}
		was := r.health
		r.health = h
		if unservable(h) && !unservable(was) {
			r.downSince = now // for the no-provider fast path (liveWithin)
			unpin = true
		}
		if was == iop.HealthState_HEALTH_STATE_UNSPECIFIED && h == iop.HealthState_HEALTH_STATE_OK {
			continue // the first report of a healthy backend is not news
		}
		d.log.Info("provider health changed", zap.String("node_id", n.id), zap.String("provider", name), zap.String("from", HealthName(was)), zap.String("to", HealthName(h)))
		if unservable(was) {
			back = append(back, r)
		}
	}
	if unpin {
		d.unpinStaleLocked()
	}
	for _, r := range back {
		d.pumpLocked(r)
	}
}

// figure is a reported figure made safe: NaN, infinities and negatives
// (a broken backend or node) read as 0.
func figure(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

// healthState reads a status API health name back (HealthName's inverse;
// "ok" reads as OK).
func healthState(name string) iop.HealthState { return healthname.Parse(name) }
