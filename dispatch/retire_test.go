package dispatch

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/config"
)

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

// A provider a reload drops and a second reload restores, while its node
// stays ready and never applied the drop (its refresh failed, or the
// second reload came first), is live again at once: the node still runs
// it, and since the node's config is unchanged no refresh answer will
// come to activate it. It keeps what its adapter declared (here that it
// is reached through the tunnel).
func TestReloadRestoredProviderGoesLive(t *testing.T) {
	cfgOf := func(withTun bool) *config.Edge {
		provs := []tProv{{name: "run", cap: 1}}
		models := []tModel{{name: "r", timeout: 5, cands: []string{"a/run"}}}
		if withTun {
			provs = append(provs, tProv{name: "tun", cap: 1})
			models = append(models, tModel{name: "m", timeout: 5, cands: []string{"a/tun"}})
		}
		cfg := buildCfg(t, []tNode{{id: "a", provs: provs}}, models)
		if withTun {
			cfg.Nodes[0].Providers[1].Type, cfg.Nodes[0].Providers[1].BaseURL = "vllm", "http://127.0.0.1:1/v1"
		}
		return cfg
	}
	f := newFixture(t, cfgOf(true), nil)
	f.up("a")
	mustAcquire(t, f.d, Request{Model: "m", NeedsTunnel: true}).Release(ReasonCompleted)
	f.d.Reload(cfgOf(false))
	if changed := f.d.Reload(cfgOf(true)); len(changed) != 0 {
		t.Fatalf("restoring the config the node runs asks to refresh %v", changed)
	}
	if p := provOf(f.d.Status(), "a", "tun"); p == nil || p.Status != "available" {
		t.Fatalf("restored provider of a ready node: %+v, want available", p)
	}
	l, err := f.d.Acquire(context.Background(), Request{Model: "m", NeedsTunnel: true, NoWait: true})
	if err != nil {
		t.Fatalf("acquire on the restored provider: %v", err)
	}
	if l.ProviderID != "tun" || !l.Tunnel {
		t.Fatalf("leased %s (tunnel %v), want tun through the tunnel", l.ProviderID, l.Tunnel)
	}
	l.Release(ReasonCompleted)
}
