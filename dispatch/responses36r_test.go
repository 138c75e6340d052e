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

// A follow-up goes to the provider that answered its previous response
// before the session's and before the strategy's choice, while that
// provider has room, is a candidate of the model and is not avoided (a
// failover from it); otherwise it is routed as if it named none (a full
// one is waited for instead, unless the request must not wait: see
// pinned37b_test.go).
func TestResponsePinPrecedence36r(t *testing.T) {
	f := selectionFixture(t)
	// p2 (capacity 2) answered resp_x; session s is on p1, the lighter.
	pinned := mustAcquire(t, f.d, Request{Model: "only-p2"})
	f.d.RememberResponse("resp_x", pinned)
	if l := mustAcquire(t, f.d, Request{Model: "both", SessionID: "s"}); l.ProviderID != "p1" {
		t.Fatalf("session s began on %s, want p1", l.ProviderID)
	}
	p2 := ProviderRef{Node: "a", Provider: "p2"}
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"pin avoided", Request{Model: "both", PreviousResponseID: "resp_x", Avoid: []ProviderRef{p2}}, "p1"},
		{"pin before session and load", Request{Model: "both", SessionID: "s", PreviousResponseID: "resp_x"}, "p2"},
		{"pin full (2/2), must not wait", Request{Model: "both", PreviousResponseID: "resp_x", NoWait: true}, "p1"},
		{"pin not a candidate", Request{Model: "only-p1", PreviousResponseID: "resp_x"}, "p1"},
		{"unknown id", Request{Model: "both", PreviousResponseID: "resp_y"}, "p1"},
	} {
		l := mustAcquire(t, f.d, c.req)
		if l.ProviderID != c.want {
			t.Errorf("%s: went to %s, want %s", c.name, l.ProviderID, c.want)
		}
		if l.ProviderID != "p2" {
			l.Release(ReasonCompleted) // p1 keeps room; p2, once it has two, stays full
		}
	}
}
