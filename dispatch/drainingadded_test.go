package dispatch

import (
	"context"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node whose drain the edge learnt from a load report (not from its
// ready) and that then applies a config adding a provider: the new
// provider goes live draining, as the node's next report would say. It
// is granted nothing: the node refuses all new work while it drains.
func TestProviderAddedToDrainingNodeGoesLiveDraining(t *testing.T) {
	one := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}
	two := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}}
	f := newFixture(t, buildCfg(t, one, []tModel{{name: "m", cands: []string{"a/p"}}}), nil)
	ca := f.up("a")
	f.d.Load(ca, drainingReport("p"))
	if p := provOf(f.d.Status(), "a", "p"); p.Health != "draining" {
		t.Fatalf("a/p after a draining report = %q, want draining", p.Health)
	}
	f.d.Reload(buildCfg(t, two, []tModel{{name: "m", cands: []string{"a/p", "a/q"}}}))
	f.d.applied("a", ca, f.d.cfg.Node("a"), f.caps("a"))
	if q := provOf(f.d.Status(), "a", "q"); q.Health != "draining" || q.Status != "draining" {
		t.Fatalf("a/q added to a draining node = health %q status %q, want draining, draining", q.Health, q.Status)
	}
	// A cancelled context probes the fast path alone: a free slot is
	// granted at once whatever the context, anything else fails.
	grantsNothing(t, f.d)
	if f.d.Dispatchable() {
		t.Fatal("Dispatchable with every provider on a draining node")
	}
}

// The same for a provider a reload restores while the draining session
// still runs it (no refresh answer makes it live then).
func TestProviderRestoredOnDrainingNodeGoesLiveDraining(t *testing.T) {
	two := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}}
	one := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}
	models := []tModel{{name: "m", cands: []string{"a/p", "a/q"}}}
	f := newFixture(t, buildCfg(t, two, models), nil)
	ca := f.up("a")
	f.d.Load(ca, drainingReport("p", "q"))
	f.d.Reload(buildCfg(t, one, []tModel{{name: "m", cands: []string{"a/p"}}}))
	f.d.Reload(buildCfg(t, two, models))
	if q := provOf(f.d.Status(), "a", "q"); q.Health != "draining" {
		t.Fatalf("a/q restored on a draining node = %q, want draining", q.Health)
	}
	grantsNothing(t, f.d)
}

// A repeated ready that says the node drains is remembered for the
// session, not only as its providers' health: a provider that replaces
// every one the node had (a reload, applied) goes live draining too.
func TestProviderReplacingAllAfterDrainingReadyGoesLiveDraining(t *testing.T) {
	f := newFixture(t, buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}}), nil)
	ca := f.up("a")
	if resp := f.d.Ready(ca, &iop.NodeReadyRequest{NodeId: "a", Draining: true}); !resp.GetReady() {
		t.Fatalf("repeated ready refused: %s", resp.GetReason())
	}
	f.d.Reload(buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "q", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/q"}}}))
	f.d.applied("a", ca, f.d.cfg.Node("a"), f.caps("a"))
	if q := provOf(f.d.Status(), "a", "q"); q.Health != "draining" {
		t.Fatalf("a/q replacing a draining node's providers = %q, want draining", q.Health)
	}
}

// The same when the edge learnt of the drain from a load report: a
// reload that drops every provider the node had still leaves the session
// known to drain, and the provider it adds goes live draining.
func TestProviderReplacingAllAfterDrainingReportGoesLiveDraining(t *testing.T) {
	f := newFixture(t, buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}}), nil)
	ca := f.up("a")
	f.d.Load(ca, drainingReport("p"))
	f.d.Reload(buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "q", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/q"}}}))
	f.d.applied("a", ca, f.d.cfg.Node("a"), f.caps("a"))
	if q := provOf(f.d.Status(), "a", "q"); q.Health != "draining" {
		t.Fatalf("a/q replacing a draining node's providers = %q, want draining", q.Health)
	}
	grantsNothing(t, f.d)
}

// grantsNothing fails if model "m" can be granted at once: its only live
// candidates drain.
func grantsNothing(t *testing.T, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if l, err := d.Acquire(ctx, Request{Model: "m"}); err == nil {
		l.Release(ReasonCompleted)
		t.Fatalf("granted on %s/%s of a node that drains", l.NodeID, l.ProviderID)
	}
}
