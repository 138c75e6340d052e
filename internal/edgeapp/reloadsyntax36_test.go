package edgeapp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A reload of a file that is not YAML keeps the running config and logs
// the line the start would print: "config: FILE: line N: …", the caller
// getting a *config.SyntaxError.
func TestReloadOfUnparsableFileNamesFileAndLine(t *testing.T) {
	_, file, e, logs := reloadableEdge(t)
	if err := os.WriteFile(file, []byte("auth:\n  api_keys: [sk-NEW\nmodels: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Reload()
	var se *config.SyntaxError
	if !errors.As(err, &se) || rep != nil {
		t.Fatalf("Reload = %v, %v; want a *config.SyntaxError", rep, err)
	}
	want := "config: " + file + ": line "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
	rec := httptest.NewRecorder()
	e.Server.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/v1/models after a rejected reload: %d, want 200 (old config)", rec.Code)
	}
	warned := logs.FilterMessage("reload rejected; config unchanged").All()
	if len(warned) != 1 || warned[0].ContextMap()["error"] != err.Error() {
		t.Fatalf("log: %v, want one warning with the error %q", logs.All(), err)
	}
}
