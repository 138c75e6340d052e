package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// GET /v1/models answers in Anthropic's list shape exactly when the
// request carries anthropic-version, whichever header carries the key:
// x-api-key alone is not an Anthropic SDK's mark (any client may send
// it), and a bearer key beside anthropic-version still is one.
func TestModelsShapeFollowsAnthropicVersion41m(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m"))
	cfg.Auth.APIKeys = []string{"sk-good"}
	e := startEdge(t, cfg)
	for _, c := range []struct {
		name      string
		hdr       map[string]string
		anthropic bool
	}{
		{"x-api-key alone", map[string]string{"x-api-key": "sk-good"}, false},
		{"bearer and anthropic-version", map[string]string{"Authorization": "Bearer sk-good", "anthropic-version": "2023-06-01"}, true},
		{"x-api-key and anthropic-version", map[string]string{"x-api-key": "sk-good", "anthropic-version": "2023-06-01"}, true},
	} {
		r := do(t, httpClient(t), http.MethodGet, e.URL+"/v1/models", "", c.hdr)
		var list struct {
			Object  string `json:"object"`
			FirstID string `json:"first_id"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &list) != nil {
			t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
		}
		if got := list.FirstID == "demo" && list.Object == ""; got != c.anthropic {
			t.Errorf("%s: %s, want Anthropic's shape: %v", c.name, r.Body, c.anthropic)
		}
	}
}
