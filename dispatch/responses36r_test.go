package dispatch

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A response id stays with the provider that answered it first: another
// provider answering the same id (an upstream echoing the
// previous_response_id of a follow-up that reached it) does not take the
// conversation's later follow-ups from the one holding it. The provider
// that holds it answering it again renews it; once forgotten (TTL), the
// id is anyone's again.
func TestRememberedResponseKeepsItsProvider36r(t *testing.T) {
	d := New(buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), Options{Bus: dropBus{}, Metrics: NewMetrics(prometheus.NewRegistry())})
	defer d.Close()
	now := time.Unix(1_700_000_000, 0)
	d.responses.now = func() time.Time { return now }
	holder := &Lease{res: &resource{key: resKey{"n", "p"}}}
	other := &Lease{res: &resource{key: resKey{"n2", "p"}}}
	lookup := func() (resKey, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.responses.get("resp_1")
	}

	d.RememberResponse("resp_1", holder)
	d.RememberResponse("resp_1", other)
	if k, ok := lookup(); !ok || k != holder.res.key {
		t.Fatalf("resp_1 → %v (%v) after another provider answered it, want %v", k, ok, holder.res.key)
	}
	now = now.Add(RememberedResponseTTL - time.Second)
	d.RememberResponse("resp_1", holder) // renewed by its holder
	now = now.Add(RememberedResponseTTL - time.Second)
	if k, ok := lookup(); !ok || k != holder.res.key {
		t.Fatalf("resp_1 → %v (%v) after its holder renewed it, want %v", k, ok, holder.res.key)
	}
	now = now.Add(time.Second)
	d.RememberResponse("resp_1", other)
	if k, ok := lookup(); !ok || k != other.res.key {
		t.Fatalf("resp_1 → %v (%v) once forgotten and answered by another, want %v", k, ok, other.res.key)
	}
}
