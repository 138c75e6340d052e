package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A node id and a model name with '/' in them are addressable with the '/'
// escaped: the admin node routes and /v1/models/{id} see the whole id
// (matched on the decoded path, the '/' split it and the request was a
// 404 naming another endpoint). The plain routes still match as before.
func TestSlashedIDsAddressableEscaped(t *testing.T) {
	const node, model = "rack/1", "org/m"
	cfg := &config.Edge{
		Nodes:  []config.NodeSpec{{ID: node, Token: nodeToken, Providers: []config.ProviderSpec{mockProvider("mock", nil)}}},
		Models: []config.ModelSpec{{Name: model, Providers: []config.ModelProvider{{Node: node, Provider: "mock", Target: "t"}}}},
	}
	cfg.Auth.AdminToken = "adm-secret"
	e := startEdge(t, cfg)
	stack.StartNode(t, e.NodeAddr, node, stack.NodeOptions{Token: nodeToken, Getenv: nodeEnv})
	e.WaitReady(t, node, waitLong)
	s := &stackT{Edge: e}

	if r := admin(t, s, http.MethodPost, "/admin/nodes/rack%2F1/refresh"); r.Status != http.StatusOK ||
		string(r.Body) != `{"node":"rack/1","reason":"","status":"applied"}` {
		t.Errorf("refresh of %q: %d %s", node, r.Status, r.Body)
	}
	if r := admin(t, s, http.MethodGet, "/admin/nodes/rack%2F1/commands/usage"); r.Status != http.StatusOK {
		t.Errorf("usage of %q: %d %s", node, r.Status, r.Body)
	}
	assertError(t, admin(t, s, http.MethodPost, "/admin/nodes/rack%2F2/refresh"), http.StatusNotFound, "node_not_found")
	// Unescaped, the '/' is a path separator: no such endpoint.
	assertError(t, admin(t, s, http.MethodPost, "/admin/nodes/rack/1/refresh"), http.StatusNotFound, "not_found")

	c := httpClient(t)
	for _, path := range []string{"/v1/models/org%2Fm", "/v1/models/org/m"} {
		if r := do(t, c, http.MethodGet, e.URL+path, "", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"id":"org/m"`) {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := post(t, e, "/v1/chat/completions", `{"model":"org/m","messages":[{"role":"user","content":"a b"}]}`); r.Status != http.StatusOK {
		t.Errorf("chat: %d %s", r.Status, r.Body)
	}
}
