package config

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
	if t.Enabled && t.Endpoint == "" {
		p.add("tracing.endpoint is required when tracing.enabled is true")
	}
}
