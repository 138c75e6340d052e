package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/internal/stack"
)

// Every /admin call leaves an audit line: who (the peer's address), what,
// the outcome, how long and its request id; a refused one too. Neither
// the token (right or wrong) nor the query is in it.
func TestAdminCallsAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.AdminToken = "adm-secret-token"
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: zap.New(core), Reload: func() (*gateway.ReloadReport, error) {
		return &gateway.ReloadReport{Nodes: map[string]string{}}, nil
	}})
	c := httpClient(t)
	calls := []struct {
		method, path, token, reqID string
		status                     int
		endpoint                   string
	}{
		{http.MethodPost, "/admin/reload?note=q-secret", "adm-secret-token", "req-reload-1", http.StatusOK, "/admin/reload"},
		{http.MethodPost, "/admin/reload", "wrong-secret-token", "req-refused-1", http.StatusUnauthorized, "/admin/reload"},
		{http.MethodPost, "/admin/sessions/sess-1/terminate", "adm-secret-token", "req-term-1", http.StatusOK, "/admin/sessions/:session_id/terminate"},
	}
	for _, cl := range calls {
		r := do(t, c, cl.method, e.URL+cl.path, "", map[string]string{"Authorization": "Bearer " + cl.token, "X-Request-Id": cl.reqID})
		if r.Status != cl.status {
			t.Fatalf("%s %s: %d %s", cl.method, cl.path, r.Status, r.Body)
		}
	}
	lines := logs.FilterMessage("admin request").All()
	if len(lines) != len(calls) {
		t.Fatalf("%d admin lines, want %d: %v", len(lines), len(calls), lines)
	}
	for i, cl := range calls {
		f := lines[i].ContextMap()
		path, _, _ := strings.Cut(cl.path, "?")
		want := map[string]any{"request_id": cl.reqID, "method": cl.method, "path": path, "endpoint": cl.endpoint, "status": int64(cl.status)}
		for k, v := range want {
			if f[k] != v {
				t.Errorf("%s: %s = %v, want %v", cl.reqID, k, f[k], v)
			}
		}
		if ra, _ := f["remote_addr"].(string); !strings.HasPrefix(ra, "127.0.0.1:") {
			t.Errorf("%s: remote_addr %q", cl.reqID, ra)
		}
		if _, ok := f["duration"]; !ok {
			t.Errorf("%s: no duration", cl.reqID)
		}
	}
	for _, l := range logs.All() {
		for k, v := range l.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "secret") {
				t.Errorf("%q: %s = %q", l.Message, k, s)
			}
		}
	}
}

// The status page itself (GET /admin, outside the /admin/ group) leaves
// an audit line too.
func TestAdminPageCallIsLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	logged := make(chan struct{}, 1)
	core = zapcore.RegisterHooks(core, func(e zapcore.Entry) error {
		if e.Message == "admin request" {
			select {
			case logged <- struct{}{}:
			default:
			}
		}
		return nil
	})
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.AdminToken = "adm-secret-token"
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: zap.New(core)})
	if r := do(t, httpClient(t), http.MethodGet, e.URL+"/admin", "", map[string]string{"X-Request-Id": "req-page-1"}); r.Status != http.StatusOK {
		t.Fatalf("GET /admin: %d", r.Status)
	}
	// The page is larger than the connection's write buffer: its bytes
	// leave while the handler runs, and the client may have read all of
	// them before the line (written as the handler returns) is.
	select {
	case <-logged:
	case <-time.After(10 * time.Second):
		t.Fatal("no admin line 10 s after the page was read")
	}
	lines := logs.FilterMessage("admin request").All()
	if len(lines) != 1 {
		t.Fatalf("%d admin lines, want 1: %v", len(lines), lines)
	}
	f := lines[0].ContextMap()
	for k, v := range map[string]any{"request_id": "req-page-1", "method": http.MethodGet, "path": "/admin", "endpoint": "/admin", "status": int64(http.StatusOK)} {
		if f[k] != v {
			t.Errorf("%s = %v, want %v", k, f[k], v)
		}
	}
}
