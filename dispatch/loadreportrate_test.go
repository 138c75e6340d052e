package dispatch

import (
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A report arriving a little before its interval after the last (timer
// jitter on the node) is taken: only reports faster than half the
// interval are dropped.
func TestLoadReportSoonerThanIntervalTaken(t *testing.T) {
	f := routingFixture(t, "least_load")
	c := f.d.nodes["a"].owner
	f.d.mu.Lock()
	n := f.d.nodes["a"]
	every := n.running.LoadReportInterval()
	n.lastLoad = time.Now().Add(-every * 3 / 4)
	f.d.mu.Unlock()
	if every <= 0 {
		t.Fatalf("load report interval %v", every)
	}
	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, Waiting: 3}}})
	if st := providerStatus(t, f.d, "p"); st.BackendWaiting != 3 {
		t.Fatalf("a report %v after the last was dropped: %+v", every*3/4, st)
	}
}

// A report longer than the node's provider list is cut to that length
// before it is looked at: entries past it (here a repeated p saying
// offline) change nothing.
func TestLoadReportEntriesPastProviderCountIgnored(t *testing.T) {
	f := routingFixture(t, "least_load")
	c := f.d.nodes["a"].owner
	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK},
		{ProviderId: "q", Health: iop.HealthState_HEALTH_STATE_OK},
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OFFLINE},
	}})
	if st := providerStatus(t, f.d, "p"); st.Health != "ok" {
		t.Fatalf("p after a report whose third entry says offline: %+v", st)
	}
}
