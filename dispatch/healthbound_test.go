package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A providers answer listing far more snapshots than the node has
// providers (a broken or hostile node) costs the edge nothing beyond the
// node's own providers: the surplus is never converted.
func TestHealthAnswerSurplusNotConverted(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	c := f.up("n1")
	snaps := make([]*iop.ProviderSnapshot, 100_000)
	for i := range snaps {
		snaps[i] = &iop.ProviderSnapshot{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_DEGRADED}
	}
	allocs := testing.AllocsPerRun(5, func() { f.d.setHealth("n1", c, snaps) })
	if allocs > 100 {
		t.Fatalf("recording an answer of %d snapshots for one provider: %.0f allocations", len(snaps), allocs)
	}
	if p := provOf(f.d.Status(), "n1", "p"); p == nil || p.Health != "degraded" {
		t.Fatalf("provider after the answer: %+v", p)
	}
}
