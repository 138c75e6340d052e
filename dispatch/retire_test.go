package dispatch

import "testing"

// A reload that drops a provider retires it in the transition function:
// its lease returns once (node_lost), it leaves the status, and the model
// keeps being served by the provider that remains; a released lease of
// the retired provider changes nothing later.
func TestReloadRetiresRemovedProvider(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p", "a/q"}}})
	f := newFixture(t, cfg, nil)
	f.up("a")
	lp := mustAcquire(t, f.d, Request{Model: "m"})
	if lp.ProviderID != "p" {
		t.Fatalf("leased %s", lp.ProviderID)
	}
	next := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/q"}}})
	f.d.Reload(next)
	if rel, why := lp.Released(); !rel || why != ReasonNodeLost {
		t.Fatalf("lease of the removed provider: released=%v reason=%s", rel, why)
	}
	lp.Release(ReasonCompleted) // a second release is a no-op
	for _, n := range f.d.Status().Nodes {
		for _, p := range n.Providers {
			if p.ProviderId == "p" {
				t.Fatal("the removed provider is still listed")
			}
		}
	}
	if got := metricValue(t, f.reg, "iop_lease_released_total", map[string]string{"node": "a", "provider": "p", "reason": "node_lost"}); got != 1 {
		t.Fatalf("released node_lost %v times, want 1", got)
	}
	if l := mustAcquire(t, f.d, Request{Model: "m"}); l.ProviderID != "q" {
		t.Fatalf("after the reload leased %s", l.ProviderID)
	}
}
