package gateway_test

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A streamed run cut by the stream idle timeout went out as a 200, but
// it is a provider failure: counted as a 502, not as a success.
func TestStreamIdleTimeoutRunCountedAs502(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", map[string]any{"delay_ms": 5000})}, modelOn("demo", "mock", "mock-echo"))
	idleConfig(cfg)
	e, _ := startStack(t, cfg)
	r := post(t, e, "/v1/chat/completions", chatBody("demo", "one two three", true))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	counted := func(code string) float64 {
		return metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": code})
	}
	// Counted once the handler returned.
	stack.WaitFor(t, waitLong, "the request counted", func() bool { return counted("502")+counted("200") == 1 })
	if got := counted("502"); got != 1 {
		t.Errorf("counted as 502 %v times (200: %v), want once", got, counted("200"))
	}
}
