package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/nodewire"
)

// Refused registrations, which anyone who can reach the node listener can
// cause, do not push the nodes' lifecycle events out of the recent-events
// ring: repeats of one refusal share an entry that counts them.
func TestRejectedRegistrationsDoNotFlushRecentEvents(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 1), oneNodeModels), nil)
	f.up("n1")
	const tries = 3 * maxEvents
	for i := range tries {
		req := regReq("n2", "wrong-token")
		if i%2 == 1 {
			req = regReq("no-such-node", testToken)
		}
		if resp := f.d.Register(new(nodewire.Conn), req); resp.GetAccepted() {
			t.Fatal("a registration with a wrong token or id was accepted")
		}
	}
	ev := f.d.RecentEvents()
	var connected bool
	rejected := 0
	for _, e := range ev {
		switch e.Type {
		case EventNodeConnected:
			connected = connected || e.NodeID == "n1"
		case EventNodeRejected:
			rejected += max(e.Count, 1)
		}
	}
	if !connected {
		t.Fatalf("n1's node.connected was pushed out by %d refused registrations: %+v", tries, ev)
	}
	if rejected != tries || len(ev) > 3 {
		t.Fatalf("recent events: %d entries counting %d refusals, want at most 3 entries counting %d: %+v", len(ev), rejected, tries, ev)
	}
}
