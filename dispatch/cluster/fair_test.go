package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Fairness is between edges: a request does not yield a free slot to an
// older waiter of its own edge (the edge's own queue already serves its
// waiters oldest first; yielding would leave the slot idle, the provider
// passed over as full, until the next wake), while it still yields to
// one of another edge.
func TestTakeDoesNotYieldToWaiterOfItsOwnEdge(t *testing.T) {
	rs := testredis.Start(t).Addr
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	a, b := ledger(t, rs, "edge-a", 5*time.Second), ledger(t, rs, "edge-a2", 5*time.Second)
	for _, l := range []*Ledger{a, b} {
		if err := l.Alive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A waiter of edge-a ahead by a second (its shift), and a younger one.
	older, younger := a.NewWaiterID(time.Second), a.NewWaiterID(0)
	if err := a.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: older}, {Kind: OpWait, Key: wait, ID: younger}}); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Take(ctx, key, 4, 4, false, a.NewLeaseID(), wait, younger, 0, 0); out != Taken || err != nil {
		t.Fatalf("a younger waiter of the same edge: %v %v, want Taken", out, err)
	}
	if out, err := a.Take(ctx, key, 4, 4, false, a.NewLeaseID(), wait, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("a fresh request of the same edge: %v %v, want Taken", out, err)
	}
	// edge-a2's name extends edge-a's: still another edge.
	if out, err := b.Take(ctx, key, 4, 4, false, b.NewLeaseID(), wait, "", 0, 0); out != Yield || err != nil {
		t.Fatalf("a fresh request of another edge: %v %v, want Yield", out, err)
	}
}
