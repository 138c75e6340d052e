package dispatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/internal/seriescache"
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
	// respUnshared counts the Responses ids this edge did not share
	// through the cluster ledger (responseShare): the only sign, short of
	// debug logs, of why another edge routes their follow-ups as usual
	// (which vLLM answers 404).
	respUnshared *prometheus.CounterVec

	// The children recorded per lease, by label values (see
	// seriescache): taking and returning a lease, and its queue wait, do
	// not hash and look up their labels in the vectors. No series of
	// these vectors is ever deleted (declare).
	acqBy  seriescache.Cache[resKey, prometheus.Counter]
	relBy  seriescache.Cache[resReason, prometheus.Counter]
	waitBy seriescache.Cache[string, prometheus.Observer]
}

// resReason labels a lease's return: its resource and reason.
type resReason struct {
	resKey
	reason ReleaseReason
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
			Buckets: QueueWaitBuckets,
		}, []string{"model"}),
		nodeSessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_node_sessions_total", Help: "Node session lifecycle outcomes.",
		}, []string{"node", "outcome"}),
		respUnshared: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_response_ids_unshared_total",
			Help: "Responses API response ids not shared with the other edges through Redis (this edge still remembers them), by reason.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.leaseAcq, m.leaseRel, m.queueWaitSec, m.nodeSessions, m.respUnshared)
	}
	// Every reason exists from the start at zero, so the first loss
	// shows in rate() and increase().
	for _, r := range []string{unsharedQueueFull, unsharedWriteFailed, unsharedStopped} {
		m.respUnshared.WithLabelValues(r)
	}
	return m
}

// Reasons of iop_response_ids_unshared_total.
const (
	unsharedQueueFull   = "queue_full"   // the writer's queue was full
	unsharedWriteFailed = "write_failed" // their batch failed (some may have landed)
	unsharedStopped     = "stopped"      // learnt as the edge stopped, after its last write
)

// responseIDsUnshared counts n ids not shared with the cluster for reason.
func (m *Metrics) responseIDsUnshared(reason string, n int) {
	m.respUnshared.WithLabelValues(reason).Add(float64(n))
}

// QueueWaitBuckets resolve both an immediate grant (sub-millisecond) and
// waits up to the 30 minutes a queue_timeout_sec may allow, with steps
// small enough that a 3 s queue timeout reads as 3 s, not 5.
var QueueWaitBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 1200, 1800}

// Session outcomes (iop_node_sessions_total{outcome}).
var sessionOutcomes = []string{"ready", "rejected", "superseded", "lost"}

// releaseReasons are every ReleaseReason.
var releaseReasons = []ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError, ReasonNodeLost}

// declare creates the counters of a configured node and its providers at
// zero, so the first session loss, rejection or node_lost release shows in
// rate() and increase() (a series born at 1 has no increase to show).
// Series of nodes and providers a reload removed are kept: their totals
// stay true.
func (m *Metrics) declare(node string, providers []string) {
	for _, o := range sessionOutcomes {
		m.nodeSessions.WithLabelValues(node, o)
	}
	for _, p := range providers {
		m.leaseAcq.WithLabelValues(node, p)
		for _, r := range releaseReasons {
			m.leaseRel.WithLabelValues(node, p, string(r))
		}
	}
}

func (m *Metrics) leaseAcquired(k resKey) {
	m.acqBy.Get(k, func(k resKey) prometheus.Counter {
		return m.leaseAcq.WithLabelValues(k.node, k.provider)
	}).Inc()
}

func (m *Metrics) leaseReleased(k resKey, r ReleaseReason) {
	m.relBy.Get(resReason{k, r}, func(k resReason) prometheus.Counter {
		return m.leaseRel.WithLabelValues(k.node, k.provider, string(k.reason))
	}).Inc()
}

func (m *Metrics) queueWait(model string, d time.Duration) {
	m.waitBy.Get(model, func(model string) prometheus.Observer {
		return m.queueWaitSec.WithLabelValues(model)
	}).Observe(d.Seconds())
}

func (m *Metrics) sessions(node, outcome string) { m.nodeSessions.WithLabelValues(node, outcome).Inc() }
