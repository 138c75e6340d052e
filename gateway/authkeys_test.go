package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// IOP_AUTH_API_KEYS="sk-one, sk-two" (a comma and a space, as lists are
// usually written) splits into " sk-two"; a request's bearer is read
// without surrounding spaces, so that key must be compared the same way or
// no request could ever present it (the config keeps keys trimmed). The
// same holds for the admin token, which the config leaves as written.
func TestKeysWithSurroundingSpacesStillMatch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edge.yaml")
	yaml := "nodes:\n  - id: " + nodeID + "\n    token: " + nodeToken + "\n    providers:\n      - {name: mock, type: mock}\n" +
		"models:\n  - name: demo\n    providers:\n      - {node: " + nodeID + ", provider: mock, target: m}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IOP_AUTH_API_KEYS", "sk-one, sk-two")
	t.Setenv("IOP_AUTH_ADMIN_TOKEN", " adm-token ")
	cfg, err := config.LoadEdge(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Auth.APIKeys) != 2 || cfg.Auth.APIKeys[1] != "sk-two" {
		t.Fatalf("api keys %q, want the trimmed keys", cfg.Auth.APIKeys)
	}
	if cfg.Auth.AdminToken != " adm-token " {
		t.Fatalf("admin token %q: the environment no longer gives a token with spaces", cfg.Auth.AdminToken)
	}
	e := startEdge(t, cfg)
	c := httpClient(t)
	for _, k := range []string{"sk-one", "sk-two"} {
		if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", map[string]string{"Authorization": "Bearer " + k}); r.Status != http.StatusOK {
			t.Errorf("key %s: %d %s", k, r.Status, r.Body)
		}
		if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", map[string]string{"X-Api-Key": k}); r.Status != http.StatusOK {
			t.Errorf("x-api-key %s: %d %s", k, r.Status, r.Body)
		}
	}
	if r := do(t, c, http.MethodGet, e.URL+"/admin/status", "", map[string]string{"Authorization": "Bearer adm-token"}); r.Status != http.StatusOK {
		t.Errorf("admin token: %d %s", r.Status, r.Body)
	}
	// Still refused: no key, an empty one, a wrong one.
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer \u00a0"}, {"X-Api-Key": "\u00a0"}, {"Authorization": "Bearer sk-three"}} {
		if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", h); r.Status != http.StatusUnauthorized {
			t.Errorf("%v: %d, want 401", h, r.Status)
		}
	}
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer \u00a0"}, {"Authorization": "Bearer adm"}} {
		if r := do(t, c, http.MethodGet, e.URL+"/admin/status", "", h); r.Status != http.StatusUnauthorized {
			t.Errorf("admin %v: %d, want 401", h, r.Status)
		}
	}
}

// A key or admin token of spaces only can never be presented: it must not
// open the surface it guards (an empty list of keys means no check). A key
// of spaces is refused by the config; a token of spaces is kept, and
// guards /admin/* with a token no request can present.
func TestBlankKeysNeverOpenTheSurface(t *testing.T) {
	blank := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m"))
	blank.Auth.APIKeys = []string{"  "}
	if err := blank.Normalize(); err == nil {
		t.Fatal("an API key of spaces only was accepted")
	}
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m"))
	cfg.Auth.APIKeys = []string{"sk-x"}
	cfg.Auth.AdminToken = " \t "
	e := startEdge(t, cfg)
	c := httpClient(t)
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer \u00a0"}, {"X-Api-Key": "\u00a0"}, {"Authorization": "Bearer x"}} {
		if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", h); r.Status != http.StatusUnauthorized {
			t.Errorf("/v1 %v: %d, want 401", h, r.Status)
		}
		if r := do(t, c, http.MethodGet, e.URL+"/admin/status", "", h); r.Status != http.StatusUnauthorized {
			t.Errorf("/admin %v: %d, want 401", h, r.Status)
		}
	}
}
