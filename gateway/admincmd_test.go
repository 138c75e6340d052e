package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node whose command answer is not JSON gets the admin caller a 502 in
// the admin envelope, not a 200 with an empty body.
func TestAdminCommandAnswerNotJSON(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Auth.AdminToken = "adm-secret"
	e := startEdge(t, cfg)
	s := &stackT{Edge: e}
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeCommandResponse{NodeCommandResponse: &iop.NodeCommandResponse{
			PayloadJson: []byte(`{"usage": [1, 2`),
		}}})
		_ = st.CloseWrite()
	})
	r := admin(t, s, http.MethodGet, "/admin/nodes/gpu-a/commands/usage")
	assertError(t, r, http.StatusBadGateway, "command_failed")
}
