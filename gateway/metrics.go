package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
}

// NewMetrics creates and registers the series on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
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
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.ttft, m.tokens, m.cancellations)
	}
	return m
}

func (m *Metrics) request(model, route, code string, d time.Duration) {
	m.requests.WithLabelValues(model, route, code).Inc()
	if route != "" {
		m.duration.WithLabelValues(model, route).Observe(d.Seconds())
	}
}

func (m *Metrics) firstToken(model, route string, d time.Duration) {
	m.ttft.WithLabelValues(model, route).Observe(d.Seconds())
}

func (m *Metrics) usage(model string, prompt, completion int64) {
	if prompt > 0 {
		m.tokens.WithLabelValues(model, "prompt").Add(float64(prompt))
	}
	if completion > 0 {
		m.tokens.WithLabelValues(model, "completion").Add(float64(completion))
	}
}

func (m *Metrics) cancelled(reason string) { m.cancellations.WithLabelValues(reason).Inc() }
