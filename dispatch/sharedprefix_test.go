package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// prefixedEdge is a dispatcher of edge under key prefix on rs, with node n
// (ready) serving provider p of capacity 1 to model m.
func prefixedEdge(t *testing.T, rs *testredis.Server, edge, prefix string) *fixture {
	t.Helper()
	f := closedLedgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: edge, KeyPrefix: prefix}, Options{})
	f.up("n")
	return f
}

// Two deployments on one Redis with different key prefixes share nothing:
// each grants its own node's capacity although their node and provider
// names are the same, each reports only its own leases, and a return
// wakes only the edges of its own deployment, through its own channel
// (only announcements wake a provider here).
func TestClusterDeploymentsWithOtherPrefixesShareNothing(t *testing.T) {
	onlyAnnouncementsWake(t)
	rs := testredis.Start(t)
	blue1, blue2 := prefixedEdge(t, rs, "blue-1", "blue"), prefixedEdge(t, rs, "blue-2", "blue")
	green := prefixedEdge(t, rs, "green-1", "green")
	held := mustAcquire(t, blue1.d, Request{Model: "m"})
	ctx := context.Background()
	ch := blue2.enqueue(ctx, Request{Model: "m"}) // blue's one slot is taken
	g := mustAcquire(t, green.d, Request{Model: "m"})
	defer g.Release(ReasonCompleted)
	for name, f := range map[string]*fixture{"blue": blue1, "green": green} {
		if h, err := f.d.ClusterHeld(ctx); err != nil || h["n/p"] != 1 {
			t.Fatalf("%s's cluster holds %v (%v), want n/p: 1", name, h, err)
		}
	}
	held.Release(ReasonCompleted)
	recvLease(t, ch).Release(ReasonCompleted)
}
