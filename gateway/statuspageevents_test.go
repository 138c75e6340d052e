//go:build linux

package gateway_test

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A browser test, Linux only as statuspage_test.go (Debian's Chromium).

// Refused registrations of one node for one reason share one event entry
// (dispatch counts them); the page says how many there were, so that a
// peer retrying a wrong token in a loop does not look like a single slip.
func TestStatusPageShowsRepeatedRejections(t *testing.T) {
	bin := chromium(t)
	e := pageStack(t, nil)
	const tries = 3
	for range tries {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		_, _, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: e.NodeAddr}, &iop.RegisterRequest{
			ProtocolVersion: nodewire.ProtocolVersion, NodeId: nodeID, Token: "wrong-token-9z"})
		cancel()
		if err == nil {
			t.Fatal("a wrong token was accepted")
		}
	}
	stack.WaitFor(t, waitLong, "the rejections recorded", func() bool {
		for _, ev := range e.Dispatcher.RecentEvents() {
			if ev.Type == "node.rejected" && ev.Count == tries {
				return true
			}
		}
		return false
	})
	dom := dumpDOM(t, bin, e.URL+"/admin#token="+pageAdminToken)
	var rejected []map[string]string
	for _, ev := range cells(t, dom, "event-row") {
		if ev["event-type"] == "node.rejected" {
			rejected = append(rejected, ev)
		}
	}
	if len(rejected) != 1 || rejected[0]["event-node"] != nodeID || rejected[0]["event-reason"] != "invalid node token (3 times)" {
		t.Errorf("rejection rows %v, want one for %s: \"invalid node token (3 times)\"", rejected, nodeID)
	}
}
