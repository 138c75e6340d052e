package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A reload that removes a ready node ends its session as a lost one: the
// node.disconnected event and iop_node_sessions_total{outcome="lost"}
// tell operators the node went, as when its connection drops.
func TestReloadRemovingReadyNodeEndsItsSession(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p", "b/p"}}})
	f := newFixture(t, cfg, nil)
	f.up("a")
	_, addr := startWire(t, f)
	cc := dialNode(t, addr, "b")
	if err := cc.Ready(context.Background(), "b"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	waitFor(t, "b ready", func() bool { return nodeOf(f.d.Status(), "b").Connected })
	next := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p"}}})
	f.d.Reload(next)
	if got := metricValue(t, f.reg, "iop_node_sessions_total", map[string]string{"node": "b", "outcome": "lost"}); got != 1 {
		t.Fatalf("sessions lost of the removed node = %v, want 1", got)
	}
	if !slices.Contains(f.bus.types(), EventNodeDisconnected) {
		t.Fatalf("events %v, want %s for the removed node", f.bus.types(), EventNodeDisconnected)
	}
	select {
	case <-cc.Done():
	case <-time.After(waitDeadline):
		t.Fatal("the removed node's connection was not closed")
	}
}
