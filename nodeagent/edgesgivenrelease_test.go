package nodeagent

import (
	"net"
	"testing"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An address dialled as given lets its claim go when its supervisor stops
// (here: rejected for good once): a name that resolves to it and was
// refused it serves it from then on.
func TestEdgeNameTakesOverAnAddressGivenAsIsThatStopped(t *testing.T) {
	script := func(n int) iop.RejectCode {
		if n == 0 {
			return iop.RejectCode_REJECT_CODE_CREDENTIALS
		}
		return iop.RejectCode_REJECT_CODE_UNSPECIFIED
	}
	edges, port := scriptedEdgesOnOnePort(t, script, "127.0.0.2")
	x := edges[0]
	dns := newNamedDNS(t)
	dns.set("alias.test", "127.0.0.2")
	alias := net.JoinHostPort("alias.test", port)
	done, stop := runEntries(t, dnsPolicy(0), []string{net.JoinHostPort("127.0.0.2", port), alias}, newTestAgent(t), zap.NewNop())
	readyOrStopped(t, x, done)
	if got := x.registrations(); got != 2 {
		t.Fatalf("%d registrations with x, want 2 (the rejected one, the name's)", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}
