package config

import (
	"errors"
	"net/url"
)

// Tracing configures OpenTelemetry tracing. Off by default.
type Tracing struct {
	Enabled bool `mapstructure:"enabled"`
	// Endpoint is the OTLP/HTTP collector, host:port (e.g. otel-collector:4318).
	Endpoint string `mapstructure:"endpoint"`
	// Insecure sends OTLP over plain HTTP.
	Insecure bool `mapstructure:"insecure"`
	// SampleRatio of new traces to keep, 0..1, after normalize: the file's
	// sample_ratio, or 1 when it is unset. Requests that arrive with a
	// sampled parent are always kept, so 0 keeps only those.
	SampleRatio float64 `mapstructure:"-"`
	// SampleRatioKey is sample_ratio as written; nil when unset. A float
	// field could not tell 0 (no new traces) from unset, and 0 became 1.
	SampleRatioKey *float64 `mapstructure:"sample_ratio"`
}

func (t *Tracing) normalize(p *problems) {
	switch {
	case t.SampleRatioKey != nil:
		t.SampleRatio = *t.SampleRatioKey
	case t.SampleRatio == 0: // unset, in the file and in Go
		t.SampleRatio = 1
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) { // NaN too
		p.add("tracing.sample_ratio must be between 0 and 1")
	}
	switch {
	case t.Enabled && t.Endpoint == "":
		p.add("tracing.endpoint is required when tracing.enabled is true")
	case t.Enabled && !OTLPHostPort(t.Endpoint):
		// Checked here, not only when the exporter starts: --check-config
		// would say ok to a config the process then refuses to start with.
		p.add("tracing.endpoint %s %v", quoteSafe(t.Endpoint), ErrOTLPEndpoint)
	case t.Enabled:
		if u, err := url.Parse("http://" + t.Endpoint); err == nil {
			checkHostName(p, "tracing.endpoint", t.Endpoint, u.Hostname())
		}
	}
}

// ErrOTLPEndpoint is what a tracing endpoint that OTLPHostPort refuses
// is told, by the config check and by the exporter's set-up alike.
var ErrOTLPEndpoint = errors.New("must be host:port, without a scheme or path (tracing.insecure chooses plain HTTP)")

// OTLPHostPort reports whether ep is a bare host[:port]. The OTLP/HTTP
// exporter puts its own scheme in front and /v1/traces after it, so
// anything else (a URL, as OTEL_EXPORTER_OTLP_ENDPOINT is written) makes a
// URL no collector answers at, and every export fails with no trace ever
// arriving.
func OTLPHostPort(ep string) bool {
	u, err := url.Parse("http://" + ep)
	return err == nil && ep != "" && u.Host == ep && u.User == nil
}
