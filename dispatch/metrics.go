package dispatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's event-driven series (CONTRACT §6). State
// gauges (iop_provider_*, iop_node_connected, iop_queue_pending) are read
// from snapshots at scrape time by StatusCollector, so they can never drift
// from the lease state.
type Metrics struct {
	leaseAcq     *prometheus.CounterVec
	leaseRel     *prometheus.CounterVec
	queueWaitSec *prometheus.HistogramVec
	nodeSessions *prometheus.CounterVec
}

// NewMetrics creates the series and registers them on reg (nil: unregistered,
// for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		leaseAcq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_lease_acquired_total", Help: "Provider leases granted.",
		}, []string{"node", "provider"}),
		leaseRel: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_lease_released_total", Help: "Provider leases returned, by reason.",
		}, []string{"node", "provider", "reason"}),
		queueWaitSec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iop_queue_wait_seconds",
			Help:    "Time from lease request to lease grant or give-up.",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"model"}),
		nodeSessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_node_sessions_total", Help: "Node session lifecycle outcomes.",
		}, []string{"node", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.leaseAcq, m.leaseRel, m.queueWaitSec, m.nodeSessions)
	}
	return m
}

func (m *Metrics) leaseAcquired(k resKey) { m.leaseAcq.WithLabelValues(k.node, k.provider).Inc() }

func (m *Metrics) leaseReleased(k resKey, r ReleaseReason) {
	m.leaseRel.WithLabelValues(k.node, k.provider, string(r)).Inc()
}

func (m *Metrics) queueWait(model string, d time.Duration) {
	m.queueWaitSec.WithLabelValues(model).Observe(d.Seconds())
}

func (m *Metrics) sessions(node, outcome string) { m.nodeSessions.WithLabelValues(node, outcome).Inc() }
