package gateway_test

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A 405 on /v1/messages* is counted (and logged) under the Anthropic
// surface, as its answer is shaped: an operator reading
// iop_surface_requests_total by surface sees Claude Code's wrong methods
// there, not under openai.
func TestMessages405CountedUnderAnthropic(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = []string{"sk-app"}
	e := startEdge(t, cfg)
	c := httpClient(t)
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/v1/messages"},
		{http.MethodPut, "/v1/messages/count_tokens"},
		{http.MethodDelete, "/v1/chat/completions"},
	} {
		if r := do(t, c, req.method, e.URL+req.path, "", nil); r.Status != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: %d, want 405", req.method, req.path, r.Status)
		}
	}
	if got := metric(t, e.Registry, "iop_surface_requests_total", map[string]string{"surface": "anthropic", "code": "405"}); got != 2 {
		t.Fatalf("iop_surface_requests_total{anthropic,405} = %v, want 2", got)
	}
	if got := metric(t, e.Registry, "iop_surface_requests_total", map[string]string{"surface": "openai", "code": "405"}); got != 1 {
		t.Fatalf("iop_surface_requests_total{openai,405} = %v, want 1", got)
	}
}
