package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Only a provider's first drain gets a report past the rate limit: a
// draining report repeated inside the interval, or one whose draining
// entry is past as many entries as the node has providers, is dropped with
// its figures, so a node cannot use either to report faster.
func TestDrainingReportOnlyOnceThroughRate(t *testing.T) {
	every := 60.0
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}})
	cfg.Nodes[0].LoadReportIntervalSec = &every
	f := newFixture(t, cfg, nil)
	ca := f.up("a")

	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK}}})
	// A second entry for p saying it drains is past the node's one
	// provider: the report is rate limited like any other.
	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, Running: 7},
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_DRAINING},
	}})
	if p := provOf(f.d.Status(), "a", "p"); p.BackendRunning != 0 || p.Health != "ok" {
		t.Fatalf("a/p after a report with a draining entry past its providers: %+v", p)
	}

	f.d.Load(ca, drainingReport("p"))
	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_DRAINING, Running: 5}}})
	if p := provOf(f.d.Status(), "a", "p"); p.Health != "draining" || p.BackendRunning != 0 {
		t.Fatalf("a/p after a repeated draining report inside the interval: %+v", p)
	}
}
