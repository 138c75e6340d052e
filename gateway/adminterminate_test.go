package gateway_test

import (
	"net/http"
	"strings"
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

// A session id no request could have named (not UTF-8, control
// characters, longer than X-IOP-Session-Id allows) is refused with a 400
// before any node is asked: sent on, it failed to encode, and the answer
// said node_lost of nodes that were fine.
func TestAdminTerminateRefusesInvalidSessionID(t *testing.T) {
	s := adminStack(t)
	for _, id := range []string{"%FF%FE", "a%00b", "x%0Ay", strings.Repeat("s", 257)} {
		r := admin(t, s, http.MethodPost, "/admin/sessions/"+id+"/terminate")
		assertError(t, r, http.StatusBadRequest, "invalid_request")
	}
	if got := cancellations(t, s.Edge, "admin"); got != 0 {
		t.Fatalf("iop_cancellations_total{admin} = %v, want 0", got)
	}
	r := admin(t, s, http.MethodPost, "/admin/sessions/"+strings.Repeat("s", 256)+"/terminate")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"nodes_reached":1`) {
		t.Fatalf("a valid id: %d %s", r.Status, r.Body)
	}
}
