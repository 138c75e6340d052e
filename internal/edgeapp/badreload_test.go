package edgeapp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/config"
)

// A reload of a file with problems changes nothing: the running config
// stays in force (here: no API key needed), the caller gets every problem,
// and the log says why without the file's secrets.
func TestBadReloadKeepsRunningConfig(t *testing.T) {
	base, file, e, logs := reloadableEdge(t)
	bad := base + "auth: {api_keys: [sk-NEW-SECRET]}\nlimits: {write_timeout_sec: -1, read_timeout_sec: -2}\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Reload()
	var pe *config.ProblemsError
	if !errors.As(err, &pe) || rep != nil {
		t.Fatalf("Reload = %v, %v; want a *config.ProblemsError", rep, err)
	}
	for _, want := range []string{"limits.write_timeout_sec must be positive", "limits.read_timeout_sec must be positive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	rec := httptest.NewRecorder()
	e.Server.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/v1/models without a key after a rejected reload: %d, want 200 (old config)", rec.Code)
	}
	warned := logs.FilterMessage("reload rejected; config unchanged").All()
	if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel {
		t.Fatalf("log: %v, want one warning", logs.All())
	}
	if s := warned[0].ContextMap()["error"]; s == nil || strings.Contains(s.(string), "SECRET") {
		t.Fatalf("logged error %v", s)
	}
}

// reloadableEdge is an edge started from its own file (base, one node,
// listening on free ports), whose log at info and above is logs; the
// test rewrites file to reload it.
func reloadableEdge(t *testing.T) (base, file string, e *Edge, logs *observer.ObservedLogs) {
	t.Helper()
	base = "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0'}\n" + oneNodeYAML
	file, cfg := edgeFile(t, base)
	core, logs := observer.New(zapcore.InfoLevel)
	e, err := New(cfg, Options{HealthInterval: -1, ConfigFile: file, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return base, file, e, logs
}
