package stack

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testredis"
)

// An edge shutting down lets a request in flight finish and gives its
// slot back to the shared ledger: the dispatcher (and its ledger loop)
// now outlives the HTTP drain. Before, it was closed first, and the
// finished request's slot stayed taken in Redis for the lease TTL (a
// minute here) for every other edge.
func TestShutdownDrainReturnsSlotsToTheLedger(t *testing.T) {
	rs := testredis.Start(t)
	cfg := func() *config.Edge {
		c := clusterCfg(rs.Addr)
		c.Cluster.Redis.LeaseTTLSec = 60
		return c
	}
	ea := StartEdge(t, cfg(), EdgeOptions{})
	eb := StartEdge(t, cfg(), EdgeOptions{})
	StartNode(t, ea.NodeAddr, "a", NodeOptions{Token: "ta", MoreEdges: []string{eb.NodeAddr}})
	ea.WaitReady(t, "a", 10*time.Second)
	eb.WaitReady(t, "a", 10*time.Second)

	inflight := postAsync(ea.URL) // the mock answers after 1.5 s
	WaitFor(t, 5*time.Second, "edge a holds a slot", func() bool {
		held, err := eb.Dispatcher.ClusterHeld(context.Background())
		return err == nil && held["a/m"] == 1
	})
	closed := make(chan struct{})
	// Owner: this test; ends when the edge has shut down.
	go func() { defer close(closed); ea.Close() }()
	select {
	case code := <-inflight:
		if code != http.StatusOK {
			t.Fatalf("request in flight at shutdown: status %d, want 200 (drained)", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the request in flight never finished")
	}
	<-closed
	WaitFor(t, 5*time.Second, "the drained request's slot back in the ledger", func() bool {
		held, err := eb.Dispatcher.ClusterHeld(context.Background())
		return err == nil && held["a/m"] == 0
	})
}
