package dispatch

import "testing"

// A returned lease is forgotten by its resource whichever way it returned
// (its holder, the fence of its generation): a long-lived connection
// serving many requests keeps no record per request.
func TestReturnedLeasesForgotten(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	c := f.up("n1")
	for range 3 {
		mustAcquire(t, f.d, Request{Model: "m"}).Release(ReasonCompleted)
	}
	held := mustAcquire(t, f.d, Request{Model: "m"})
	f.d.mu.Lock()
	n := len(f.d.resources[resKey{"n1", "p"}].leases)
	f.d.mu.Unlock()
	if n != 1 {
		t.Fatalf("resource records %d leases, want the 1 held", n)
	}
	f.d.Closed(c, nil)
	if ok, why := held.Released(); !ok || why != ReasonNodeLost {
		t.Fatalf("held lease after the fence: released %v, %s", ok, why)
	}
	f.d.mu.Lock()
	n = len(f.d.resources[resKey{"n1", "p"}].leases)
	f.d.mu.Unlock()
	if n != 0 {
		t.Fatalf("resource records %d leases after the fence, want 0", n)
	}
}
