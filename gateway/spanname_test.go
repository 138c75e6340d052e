package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// spanNameSink passes the name of every ended span to names.
type spanNameSink struct{ names chan string }

func (p spanNameSink) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p spanNameSink) OnEnd(s sdktrace.ReadOnlySpan)                   { p.names <- s.Name() }
func (p spanNameSink) Shutdown(context.Context) error                  { return nil }
func (p spanNameSink) ForceFlush(context.Context) error                { return nil }

// A request no route serves (404, 405) names its span by its method when
// that is a standard one and "HTTP" otherwise, with no path: a client
// inventing methods or paths made a new span name with each. A routed
// request keeps "{method} {route}".
func TestUnroutedSpanNamesAreAFixedSet(t *testing.T) {
	sink := spanNameSink{names: make(chan string, 64)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sink))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Tracer: tp})
	c := httpClient(t)
	for _, tc := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/v1/models", http.StatusOK, "GET /v1/models"},
		{"GET", "/v1/models/demo", http.StatusOK, "GET /v1/models/*id"},
		{"FOO", "/v1/models", http.StatusMethodNotAllowed, "HTTP"},
		{"BAR", "/v1/chat/completions", http.StatusMethodNotAllowed, "HTTP"},
		{"get", "/v1/models", http.StatusMethodNotAllowed, "HTTP"},
		{"FOO", "/v1/nowhere-1", http.StatusNotFound, "HTTP"},
		{"DELETE", "/v1/models", http.StatusMethodNotAllowed, "DELETE"},
		{"GET", "/v1/nowhere-2", http.StatusNotFound, "GET"},
		{"PATCH", "/v1/messages", http.StatusMethodNotAllowed, "PATCH"},
		{"TRACE", "/v1/x", http.StatusNotFound, "TRACE"},
	} {
		if r := do(t, c, tc.method, e.URL+tc.path, "", nil); r.Status != tc.status {
			t.Fatalf("%s %s: %d, want %d", tc.method, tc.path, r.Status, tc.status)
		}
		select {
		case got := <-sink.names:
			if got != tc.want {
				t.Errorf("%s %s: span %q, want %q", tc.method, tc.path, got, tc.want)
			}
		case <-time.After(waitLong):
			t.Fatalf("%s %s: no span ended", tc.method, tc.path)
		}
	}
	select {
	case n := <-sink.names:
		t.Errorf("a span beyond one per request: %q", n)
	default:
	}
}
