package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node's new session starts without the backend load its last one
// reported: routing used the old figures for up to loadStale, and the new
// session's first report, arriving sooner than half the interval after
// the old session's last, was ignored.
func TestNewSessionStartsWithoutOldLoad(t *testing.T) {
	f := routingFixture(t, "least_load")
	c := f.d.nodes["a"].owner
	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, Running: 4, Waiting: 9},
	}})
	if providerStatus(t, f.d, "p").BackendWaiting != 9 {
		t.Fatal("the first session's report was not taken")
	}

	f.d.Closed(c, nil)
	c2 := f.up("a")
	if st := providerStatus(t, f.d, "p"); st.BackendWaiting != 0 || st.BackendRunning != 0 {
		t.Fatalf("the new session shows the old one's load: %+v", st)
	}
	f.d.Load(c2, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, Running: 1, Waiting: 2},
	}})
	if st := providerStatus(t, f.d, "p"); st.BackendWaiting != 2 {
		t.Fatalf("the new session's first report was ignored: %+v", st)
	}
}
