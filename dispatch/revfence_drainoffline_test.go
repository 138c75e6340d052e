package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A draining node's provider whose backend goes down shows as down (the
// operator sees the outage, not a drain), and one whose backend comes back
// shows as draining again, not healthy: the drain is one-way, an outage is
// not hidden by it. Nothing is granted there either way.
func TestDrainingProviderBackendDownShowsOffline(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	_, addr := startWire(t, f)
	cc := readyDrainingNode(t, f, addr, false)
	t.Cleanup(func() { _ = cc.Close() })
	waitFor(t, "n1 live", func() bool { return provOf(f.d.Status(), "n1", "p").Health == "ok" })
	c := ownerOfN1(f)
	f.d.Load(c, drainingReport("p"))
	f.d.setHealth("n1", c, []*iop.ProviderSnapshot{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OFFLINE}})
	if p := provOf(f.d.Status(), "n1", "p"); p.Health != "offline" || p.Status != "unavailable" {
		t.Fatalf("draining n1/p with its backend down = %q/%q, want offline/unavailable", p.Health, p.Status)
	}
	grantsNothing(t, f.d)
	f.d.setHealth("n1", c, []*iop.ProviderSnapshot{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK}})
	if p := provOf(f.d.Status(), "n1", "p"); p.Health != "draining" || p.Status != "draining" {
		t.Fatalf("draining n1/p with its backend back = %q/%q, want draining/draining", p.Health, p.Status)
	}
	grantsNothing(t, f.d)
}
