package nodeagent

import (
	"context"
	"errors"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// loadIdleCheck is how often a node whose config asks for no load reports
// looks again (a refresh may turn them on).
const loadIdleCheck = 5 * time.Second

// loadSender is what reportLoad needs of the session's connection (a
// *nodewire.ClientConn): tests give it one whose sends fail the ways a
// stalled or cut connection's do, which a loopback edge cannot be made to
// do on cue.
type loadSender interface {
	SendLoad(r *iop.LoadReport, deadline time.Time) error
}

// drainReportEvery is how often, at the most, a draining node repeats
// that it drains. An edge takes no report from a session before it has
// made the session's providers live, and a session that reconnects during
// the drain may send its first one before: the next must not be a whole
// report interval (or, with reports off, loadIdleCheck) away. A drain
// lasts shutdown.drain_sec, so this is a few dozen small reports.
const drainReportEvery = 500 * time.Millisecond

// reportLoad samples every instance's backend and sends a LoadReport on
// conn every load_report_interval_ms of the applied config (read at each
// tick, so a refresh takes effect), until ctx ends or the connection
// closes. A report the edge was too slow to take within the interval is
// skipped, not retried: the next one is newer. A sample is bounded by the
// interval: a backend that does not answer its health probe in time is
// reported as it last was by its adapter's own cache, never waited for.
//
// Once the node drains, a report saying every provider is draining goes
// out at once (Drain wakes the loop), and then every drainReportEvery (or
// the interval, if shorter), even when the config asks for no load
// reports: it is what keeps the edges from sending work here.
func (a *Agent) reportLoad(ctx context.Context, conn loadSender) {
	wake, unregister := a.wakeOnDrain()
	defer unregister()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
			t.Stop() // no stale tick after Stop (go 1.23 timers)
		}
		every := a.loadInterval()
		draining := a.Draining()
		if every <= 0 && !draining {
			t.Reset(loadIdleCheck)
			continue
		}
		var r *iop.LoadReport
		if !draining {
			sctx, cancel := context.WithTimeout(ctx, every)
			// A drain that begins meanwhile cuts the sample short: the
			// edges hear of it at once, not once a backend that does not
			// answer has used up the interval.
			unhook := context.AfterFunc(a.drainBegun, cancel)
			r = a.loadReport(sctx)
			unhook()
			cancel()
			draining = a.Draining()
		}
		if draining {
			if every <= 0 || every > drainReportEvery {
				every = drainReportEvery
			}
			r = a.drainReport()
			select {
			case <-wake: // this report is the one Drain asked for
			default:
			}
		}
		if err := conn.SendLoad(r, time.Now().Add(every)); err != nil {
			if ctx.Err() != nil || !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, nodewire.ErrStreamCut) {
				return // the session is ending
			}
			a.log.Debug("load report not sent in time", zap.Error(err))
		}
		t.Reset(every)
	}
}

// drainReport says every instance is draining; backends are not probed
// (nothing is sent to them any more).
func (a *Agent) drainReport() *iop.LoadReport {
	r := &iop.LoadReport{}
	for _, in := range a.snapshotInstances() {
		r.Providers = append(r.Providers, &iop.ProviderLoad{ProviderId: in.name, Health: iop.HealthState_HEALTH_STATE_DRAINING})
	}
	return r
}

func (a *Agent) loadInterval() time.Duration {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return time.Duration(a.applied.GetRuntime().GetLoadReportIntervalMs()) * time.Millisecond
}

// loadReport samples each instance that reports health and load.
func (a *Agent) loadReport(ctx context.Context) *iop.LoadReport {
	r := &iop.LoadReport{}
	for _, in := range a.snapshotInstances() {
		hr, ok := in.impl.(adapter.HealthReporter)
		if !ok {
			continue
		}
		h := in.health(ctx, hr, a.log)
		r.Providers = append(r.Providers, &iop.ProviderLoad{ProviderId: in.name, Health: h.Status,
			Running: h.Running, Waiting: h.Waiting, KvCacheUsage: h.KVCacheUsage})
	}
	return r
}
