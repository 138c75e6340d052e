package dispatch

import (
	"context"
	"testing"
)

func twoProviderFixture(t *testing.T) *fixture {
	nodes := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 4}}}, {id: "b", provs: []tProv{{name: "p", cap: 4}}}}
	f := newFixture(t, buildCfg(t, nodes, []tModel{{name: "m", cands: []string{"a/p", "b/p"}}}), nil)
	f.up("a")
	f.up("b")
	return f
}

// A failover never lands on a provider the request already failed on,
// however idle it is.
func TestFailoverAvoidsFailedProvider(t *testing.T) {
	f := twoProviderFixture(t)
	for range 8 {
		l := mustAcquire(t, f.d, Request{Model: "m", NoWait: true, Avoid: []ProviderRef{{Node: "b", Provider: "p"}}})
		if l.NodeID != "a" {
			t.Fatalf("leased on %s/%s, which the request avoids", l.NodeID, l.ProviderID)
		}
		l.Release(ReasonCompleted)
	}
	_, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true,
		Avoid: []ProviderRef{{Node: "a", Provider: "p"}, {Node: "b", Provider: "p"}}})
	wantErr(t, err, ErrNoProvider)
}

// A session's failover is not sent back to the provider that served the
// session last when that is the provider it failed on.
func TestSessionFailoverAvoidsAffinity(t *testing.T) {
	f := twoProviderFixture(t)
	first := mustAcquire(t, f.d, Request{Model: "m", SessionID: "s"})
	first.Release(ReasonCompleted)
	l := mustAcquire(t, f.d, Request{Model: "m", SessionID: "s", NoWait: true,
		Avoid: []ProviderRef{{Node: first.NodeID, Provider: first.ProviderID}}})
	defer l.Release(ReasonCompleted)
	if l.NodeID == first.NodeID {
		t.Fatalf("failover leased on %s again, which it failed on", l.NodeID)
	}
}
