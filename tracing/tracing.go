// Package tracing wires OpenTelemetry for iop: an OTLP/HTTP exporter when
// enabled (a no-op tracer otherwise), and the W3C trace context carried
// across the Edge-Node wire in run and tunnel metadata.
package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/iop-gateway/iop/config"
)

// shutdownTimeout bounds the final flush of buffered spans.
const shutdownTimeout = 5 * time.Second

// Setup returns the tracer provider for cfg and a shutdown func that
// flushes it (bounded by shutdownTimeout). Disabled tracing returns a no-op
// provider.
func Setup(ctx context.Context, cfg config.Tracing, service string) (trace.TracerProvider, func(), error) {
	if !cfg.Enabled {
		return noop.NewTracerProvider(), func() {}, nil
	}
	if !config.OTLPHostPort(cfg.Endpoint) {
		// The value is not quoted: a URL's user info is a credential, and
		// this error is logged. Normalize has named the problem already.
		return nil, nil, fmt.Errorf("tracing: endpoint: %w", config.ErrOTLPEndpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.Endpoint)}
	if cfg.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))),
	)
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = tp.Shutdown(ctx)
	}
	return tp, shutdown, nil
}

var propagator = propagation.TraceContext{}

// Inject writes ctx's trace context into wire metadata (traceparent,
// tracestate). m must be non-nil.
func Inject(ctx context.Context, m map[string]string) {
	propagator.Inject(ctx, propagation.MapCarrier(m))
}

// Extract returns ctx carrying the trace context found in wire metadata.
func Extract(ctx context.Context, m map[string]string) context.Context {
	if len(m) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(m))
}

// FromHTTP returns ctx carrying a W3C trace context sent by the HTTP
// caller, if any.
func FromHTTP(ctx context.Context, h propagation.TextMapCarrier) context.Context {
	return propagator.Extract(ctx, h)
}
