package gateway_test

import (
	"net/http"
	"testing"
)

// The authentication scheme's name is case-insensitive (RFC 9110 §11.1):
// "bearer" and "BEARER" carry the key as "Bearer" does, for the API keys
// and the admin token; the key itself is compared exactly.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Auth.APIKeys = []string{"sk-one"}
	cfg.Auth.AdminToken = "adm-token"
	e := startEdge(t, cfg)
	c := httpClient(t)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", map[string]string{"Authorization": scheme + " sk-one"}); r.Status != http.StatusOK {
			t.Errorf("%s sk-one: %d %s", scheme, r.Status, r.Body)
		}
		if r := do(t, c, http.MethodGet, e.URL+"/admin/status", "", map[string]string{"Authorization": scheme + " adm-token"}); r.Status != http.StatusOK {
			t.Errorf("%s adm-token: %d %s", scheme, r.Status, r.Body)
		}
	}
	r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", map[string]string{"Authorization": "bearer SK-ONE"})
	assertError(t, r, http.StatusUnauthorized, "invalid_api_key")
}
