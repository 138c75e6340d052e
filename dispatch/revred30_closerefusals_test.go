package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Takes Redis refused after their kind's warning, inside the minute,
// are warned of at Close, as the returner does with the returns it held
// back: without it an edge shut down during a refusal (a failover left
// it on a read-only replica) told one refused grant where there were
// many.
func TestClusterHeldBackRefusedTakesAreWarnedOfAtClose(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedCluster(t, rs)
	rs.ReadOnly(t)
	refuseTakes(t, f, 3)
	if warns := refusedGrantWarnings(logs); len(warns) != 1 {
		t.Fatalf("%d warnings of refused grants before Close, want 1: %v", len(warns), warns)
	}
	f.d.Close()
	warns := refusedGrantWarnings(logs)
	if len(warns) != 2 {
		t.Fatalf("%d warnings of refused grants after Close, want 2 (the first, then the two held back): %v", len(warns), warns)
	}
	if got := warns[1].ContextMap()["batches"]; got != int64(2) {
		t.Fatalf("Close warned of %v refused grants held back, want 2", got)
	}
}
