package gateway_test

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
)

// A session termination that reached no node cancelled nothing: it is not
// counted in iop_cancellations_total{reason="admin"} (it was, once per
// call, whether or not any node was asked).
func TestAdminTerminateReachingNoNodeIsNotACancellation(t *testing.T) {
	s := adminStack(t)
	s.Node.Stop()
	stack.WaitFor(t, waitLong, "gpu-a to drop", func() bool {
		for _, n := range s.Dispatcher.Status().Nodes {
			if n.ID == "gpu-a" && n.Connected {
				return false
			}
		}
		return true
	})
	r := admin(t, s, http.MethodPost, "/admin/sessions/sess-1/terminate")
	if r.Status != http.StatusOK || string(r.Body) != `{"nodes_reached":0,"session_id":"sess-1"}` {
		t.Fatalf("terminate: %d %s", r.Status, r.Body)
	}
	if got := cancellations(t, s.Edge, "admin"); got != 0 {
		t.Fatalf("iop_cancellations_total{admin} = %v, want 0 (no node was reached)", got)
	}
}
