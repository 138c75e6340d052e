package gateway_test

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// Health checkers that probe with HEAD (HAProxy's httpchk, uptime
// monitors) get the same status as GET: a 404 would mark a healthy edge
// down.
func TestHealthProbesAnswerHead(t *testing.T) {
	e := startEdge(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m")))
	c := httpClient(t)
	if r := do(t, c, http.MethodHead, e.URL+"/healthz", "", nil); r.Status != http.StatusOK || len(r.Body) != 0 {
		t.Errorf("HEAD /healthz: %d %q", r.Status, r.Body)
	}
	if r := do(t, c, http.MethodHead, e.URL+"/readyz", "", nil); r.Status != http.StatusServiceUnavailable {
		t.Errorf("HEAD /readyz before any node: %d", r.Status)
	}
	startNode(t, e)
	if r := do(t, c, http.MethodHead, e.URL+"/readyz", "", nil); r.Status != http.StatusOK || len(r.Body) != 0 {
		t.Errorf("HEAD /readyz with a ready node: %d %q", r.Status, r.Body)
	}
}
