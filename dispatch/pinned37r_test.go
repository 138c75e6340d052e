package dispatch

import (
	"context"
	"testing"
)

// A node's report that drains all its providers at once (a node drains
// every provider or none) unpins the follow-ups pinned to the first one
// it lists, and must not hand them a slot of another provider the same
// report drains. Before, the unpinning (and its pump) ran in the middle of
// the report: a/q, not yet marked draining, was granted to the follow-up.
func TestPinnedDrainReportGrantsNoDrainingProvider37r(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 60, cands: []string{"a/p", "a/q"}}})
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	la := mustAcquire(t, f.d, Request{Model: "m"})
	if la.ProviderID != "p" {
		t.Fatalf("first lease on %s, want p", la.ProviderID)
	}
	f.d.RememberResponse("resp_p", la)
	fu := f.enqueue(context.Background(), Request{Model: "m", PreviousResponseID: "resp_p"})
	// a/q is free: the follow-up waits for a/p.
	f.d.Load(ca, drainingReport("p", "q"))
	st := f.d.Status()
	if n, q := pendingOf(st, "m"), provOf(st, "a", "q").InFlight; n != 1 || q != 0 {
		t.Fatalf("after the drain report: pending %d, a/q in flight %d; want the follow-up still queued, nothing on a/q", n, q)
	}
	select {
	case r := <-fu:
		t.Fatalf("the follow-up was settled by a drain (lease %v, err %v)", r.l != nil, r.err)
	default:
	}
}
