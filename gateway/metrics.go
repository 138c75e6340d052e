package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/internal/seriescache"
)

// Route labels.
const (
	routeTunnel = "tunnel"
	routeRun    = "run"
)

// Cancel reasons (iop_cancellations_total{reason}).
const (
	CancelClientDisconnect = "client_disconnect"
	CancelTimeout          = "timeout"
	CancelWriteError       = "write_error"
	CancelAdmin            = "admin"
)

// Metrics are the HTTP surface's series (CONTRACT §6). Labels are bounded:
// model names come from config (unknown models are counted as "unknown"),
// never a request id, key, user or session.
type Metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	ttft          *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	cancellations *prometheus.CounterVec
	surfaces      *prometheus.CounterVec
	failovers     *prometheus.CounterVec

	// The children recorded per request, cached by label values so that a
	// request does not hash and look up its labels in the vector
	// (WithLabelValues) for each of them. The caches hold what the vectors
	// already hold, so they are bounded as the labels are.
	requestsBy      seriescache.Cache[modelRouteCode, prometheus.Counter]
	durationBy      seriescache.Cache[modelLabel, prometheus.Observer]
	ttftBy          seriescache.Cache[modelLabel, prometheus.Observer]
	tokensBy        seriescache.Cache[modelLabel, prometheus.Counter]
	cancellationsBy seriescache.Cache[string, prometheus.Counter]
	surfacesBy      seriescache.Cache[modelLabel, prometheus.Counter] // (surface, code)
}

type modelRouteCode struct{ model, route, code string }

// modelLabel is a model and one more label (route or kind).
type modelLabel struct{ model, label string }

// NewMetrics creates and registers the series on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := DurationBuckets
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_requests_total", Help: "HTTP API requests by model, route and response code.",
		}, []string{"model", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "iop_request_duration_seconds", Help: "Request duration from arrival to the last byte.", Buckets: buckets,
		}, []string{"model", "route"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "iop_time_to_first_token_seconds", Help: "Time from arrival to the first response body byte.", Buckets: buckets,
		}, []string{"model", "route"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_tokens_total", Help: "Tokens reported by providers.",
		}, []string{"model", "kind"}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_cancellations_total", Help: "Upstream requests cancelled by the edge, by reason.",
		}, []string{"reason"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_failovers_total", Help: "Requests moved to another candidate after their provider failed before the first byte, by reason.",
		}, []string{"model", "reason"}),
		surfaces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_surface_requests_total", Help: "HTTP API requests by API surface (openai, anthropic) and response code.",
		}, []string{"surface", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.ttft, m.tokens, m.cancellations, m.surfaces, m.failovers)
	}
	// Every reason exists from the start at zero, so the first
	// cancellation of a kind shows in rate() and increase().
	for _, r := range []string{CancelClientDisconnect, CancelTimeout, CancelWriteError, CancelAdmin} {
		m.cancellations.WithLabelValues(r)
	}
	return m
}

// DurationBuckets are the buckets of request durations and times to first
// token: fine below a second, then steps of at most 1.5–2× up to the
// 30 minutes a CLI agent's run may take, so that a 20 s request is not
// reported as 30 s, nor a 10-minute run as +Inf.
var DurationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1200, 1800}

// declareModels creates each model's failover counters at zero, so the
// first failover shows in rate() and increase().
func (m *Metrics) declareModels(models []string) {
	for _, name := range models {
		for _, r := range failoverReasons {
			m.failovers.WithLabelValues(name, r)
		}
	}
}

// failover counts a request moved to another candidate. Rare: no cache.
func (m *Metrics) failover(model, reason string) { m.failovers.WithLabelValues(model, reason).Inc() }

// surface counts a request by the API surface it came through.
func (m *Metrics) surface(surface, code string) {
	m.surfacesBy.Get(modelLabel{surface, code}, func(k modelLabel) prometheus.Counter {
		return m.surfaces.WithLabelValues(k.model, k.label)
	}).Inc()
}

func (m *Metrics) request(model, route, code string, d time.Duration) {
	m.requestsBy.Get(modelRouteCode{model, route, code}, func(k modelRouteCode) prometheus.Counter {
		return m.requests.WithLabelValues(k.model, k.route, k.code)
	}).Inc()
	if route != "" {
		m.durationBy.Get(modelLabel{model, route}, func(k modelLabel) prometheus.Observer {
			return m.duration.WithLabelValues(k.model, k.label)
		}).Observe(d.Seconds())
	}
}

func (m *Metrics) firstToken(model, route string, d time.Duration) {
	m.ttftBy.Get(modelLabel{model, route}, func(k modelLabel) prometheus.Observer {
		return m.ttft.WithLabelValues(k.model, k.label)
	}).Observe(d.Seconds())
}

func (m *Metrics) usage(model string, prompt, completion int64) {
	if prompt > 0 {
		m.token(model, "prompt").Add(float64(prompt))
	}
	if completion > 0 {
		m.token(model, "completion").Add(float64(completion))
	}
}

func (m *Metrics) token(model, kind string) prometheus.Counter {
	return m.tokensBy.Get(modelLabel{model, kind}, func(k modelLabel) prometheus.Counter {
		return m.tokens.WithLabelValues(k.model, k.label)
	})
}

func (m *Metrics) cancelled(reason string) {
	m.cancellationsBy.Get(reason, func(k string) prometheus.Counter {
		return m.cancellations.WithLabelValues(k)
	}).Inc()
}
