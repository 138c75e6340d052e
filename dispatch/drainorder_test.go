package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ownerOfN1 is the connection that owns n1.
func ownerOfN1(f *fixture) *nodewire.Conn {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	return f.d.nodes["n1"].owner
}

// A session that said it drains stays draining for every provider until
// it ends, whatever order its reports arrive in: a health poll or a load
// report the node answered before it began to drain, arriving after the
// drain, sets no provider healthy again (the edge would otherwise send it
// work it refuses CAPACITY_EXCEEDED).
func TestDrainOutlivesReportsAnsweredBefore(t *testing.T) {
	ok := iop.HealthState_HEALTH_STATE_OK
	for _, tc := range []struct {
		name  string
		drain func(f *fixture, c *nodewire.Conn)
		late  func(f *fixture, c *nodewire.Conn)
	}{
		{"ready then poll",
			func(f *fixture, c *nodewire.Conn) { f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "n1", Draining: true}) },
			func(f *fixture, c *nodewire.Conn) {
				f.d.setHealth("n1", c, []*iop.ProviderSnapshot{{ProviderId: "p", Health: ok}})
			}},
		{"ready then load report",
			func(f *fixture, c *nodewire.Conn) { f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "n1", Draining: true}) },
			func(f *fixture, c *nodewire.Conn) {
				f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: ok}}})
			}},
		{"load report then poll",
			func(f *fixture, c *nodewire.Conn) { f.d.Load(c, drainingReport("p")) },
			func(f *fixture, c *nodewire.Conn) {
				f.d.setHealth("n1", c, []*iop.ProviderSnapshot{{ProviderId: "p", Health: ok}})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
			_, addr := startWire(t, f)
			cc := readyDrainingNode(t, f, addr, false)
			t.Cleanup(func() { _ = cc.Close() })
			waitFor(t, "n1 live", func() bool { return provOf(f.d.Status(), "n1", "p").Health == "ok" })
			c := ownerOfN1(f)
			tc.drain(f, c)
			if p := provOf(f.d.Status(), "n1", "p"); p.Health != "draining" {
				t.Fatalf("n1/p after the drain = %q, want draining", p.Health)
			}
			tc.late(f, c)
			if p := provOf(f.d.Status(), "n1", "p"); p.Health != "draining" {
				t.Fatalf("n1/p after a report answered before the drain = %q, want draining", p.Health)
			}
			grantsNothing(t, f.d)
		})
	}
}
