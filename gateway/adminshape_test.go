package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// /admin/status always has its "nodes" and "models" arrays (CONTRACT §5),
// also while the config lists none: a script iterating them (jq
// '.models[]') fails on null.
func TestAdminStatusListsAreNeverNull(t *testing.T) {
	for name, cfg := range map[string]*config.Edge{
		"no models":           edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}),
		"no nodes, no models": {},
	} {
		t.Run(name, func(t *testing.T) {
			e := startEdge(t, cfg)
			r := do(t, httpClient(t), http.MethodGet, e.URL+"/admin/status", "", nil)
			var doc map[string]json.RawMessage
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &doc) != nil {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			for _, k := range []string{"nodes", "models"} {
				if !bytes.HasPrefix(doc[k], []byte("[")) {
					t.Errorf("%q is %s, want an array: %s", k, doc[k], r.Body)
				}
			}
		})
	}
}
