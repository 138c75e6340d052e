package gateway_test

import (
	"net/http"
	"testing"
	"time"
)

// A node that takes an admin command and never answers it: the admin
// request ends after its own timeout (15 s; 1 s here, the same path)
// with 504 and code timeout, the node's silence told apart from a failed
// node (502).
func TestAdminCommandSilentNodeIs504(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Auth.AdminToken = "adm-secret"
	e := startEdge(t, cfg)
	e.Server.SetAdminTimeout37q(time.Second)
	startFakeNode(t, e, silent)
	c := httpClient(t)
	c.Timeout = 60 * time.Second
	start := time.Now()
	r := do(t, c, http.MethodGet, e.URL+"/admin/nodes/gpu-a/commands/usage", "", map[string]string{"Authorization": "Bearer adm-secret"})
	took := time.Since(start)
	assertError(t, r, http.StatusGatewayTimeout, "timeout")
	// Ended by the bound it was given, not the 15 s default: between the
	// two with room for a loaded machine on either side.
	if took < time.Second || took > 10*time.Second {
		t.Fatalf("the 504 came after %v, want about the 1 s bound", took)
	}
}
