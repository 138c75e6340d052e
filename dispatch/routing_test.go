package dispatch

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// routingFixture: model "m" lists a/p then a/q (capacity 4 each), routed by
// strategy.
func routingFixture(t *testing.T, strategy string) *fixture {
	t.Helper()
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 4}, {name: "q", cap: 4}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p", "a/q"}}})
	cfg.Models[0].Routing = strategy
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cfg, nil)
	f.up("a")
	return f
}

// ordered takes the first candidate with room however busy it is;
// least_load (the default) spreads by occupancy.
func TestRoutingOrderedAndLeastLoad(t *testing.T) {
	f := routingFixture(t, "ordered")
	for i := range 4 {
		if l := mustAcquire(t, f.d, Request{Model: "m"}); l.ProviderID != "p" {
			t.Fatalf("ordered lease %d on %s, want p until it is full", i, l.ProviderID)
		}
	}
	if l := mustAcquire(t, f.d, Request{Model: "m"}); l.ProviderID != "q" {
		t.Fatalf("ordered lease past p's capacity on %s", l.ProviderID)
	}

	f = routingFixture(t, "")
	a, b := mustAcquire(t, f.d, Request{Model: "m"}), mustAcquire(t, f.d, Request{Model: "m"})
	if a.ProviderID == b.ProviderID {
		t.Fatalf("least_load put both leases on %s", a.ProviderID)
	}
}

// least_load reads the backends' reported load: a backend with requests
// waiting and a full KV cache loses to an idle one at equal occupancy.
func TestRoutingLeastLoadUsesBackendReports(t *testing.T) {
	f := routingFixture(t, "least_load")
	c, err := f.d.nodeConn("a")
	if err != nil {
		t.Fatal(err)
	}
	f.d.setHealth("a", c, []*iop.ProviderSnapshot{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, BackendRunning: 4, BackendWaiting: 6, KvCacheUsage: 0.97},
		{ProviderId: "q", Health: iop.HealthState_HEALTH_STATE_OK},
	})
	for range 3 {
		l := mustAcquire(t, f.d, Request{Model: "m"})
		if l.ProviderID != "q" {
			t.Fatalf("leased the loaded backend %s", l.ProviderID)
		}
		l.Release(ReasonCompleted)
	}
}

// prefix_affinity sends a conversation's next turn where its earlier turns
// went, while least_load would put both on the first candidate.
func TestRoutingPrefixAffinity(t *testing.T) {
	f := routingFixture(t, "prefix_affinity")
	convA := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You answer about apples. ", 40) + `"}`)
	convB := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You answer about boats. ", 40) + `"}`)
	la := mustAcquire(t, f.d, Request{Model: "m", Prompt: convA})
	lb := mustAcquire(t, f.d, Request{Model: "m", Prompt: convB}) // a holds one lease: least load sends b elsewhere
	if la.ProviderID == lb.ProviderID {
		t.Fatalf("both conversations on %s", la.ProviderID)
	}
	la.Release(ReasonCompleted)
	lb.Release(ReasonCompleted)
	for range 3 {
		nb := mustAcquire(t, f.d, Request{Model: "m", Prompt: append(append([]byte(nil), convB...), `,{"role":"user","content":"next"}]}`...)})
		if nb.ProviderID != lb.ProviderID {
			t.Fatalf("conversation b's next turn on %s, its prefix is on %s", nb.ProviderID, lb.ProviderID)
		}
		nb.Release(ReasonCompleted)
	}
}

// A ready node's pushed LoadReport feeds routing and the status; one that
// comes faster than half the configured interval, or from a connection
// that does not own the node, is ignored; broken figures read as 0.
func TestLoadReportsFeedRouting(t *testing.T) {
	f := routingFixture(t, "least_load")
	c := f.d.nodes["a"].owner
	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, Running: 4, Waiting: 9, KvCacheUsage: 0.99},
		{ProviderId: "q", Health: iop.HealthState_HEALTH_STATE_OK, Running: math.NaN(), Waiting: -3, KvCacheUsage: math.Inf(1)},
	}})
	if l := mustAcquire(t, f.d, Request{Model: "m"}); l.ProviderID != "q" {
		t.Fatalf("leased the loaded backend %s", l.ProviderID)
	}
	st := providerStatus(t, f.d, "p")
	if st.BackendWaiting != 9 || st.KVCacheUsage != 0.99 {
		t.Fatalf("status of p: %+v", st)
	}
	if q := providerStatus(t, f.d, "q"); q.BackendRunning != 0 || q.BackendWaiting != 0 || q.KVCacheUsage != 0 {
		t.Fatalf("broken figures of q: %+v", q)
	}
	// Too soon after the last one: ignored.
	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK}}})
	if providerStatus(t, f.d, "p").BackendWaiting != 9 {
		t.Fatal("a report faster than the interval was taken")
	}
	// From a connection that does not own the node: ignored.
	f.d.nodes["a"].lastLoad = time.Time{}
	f.d.Load(new(nodewire.Conn), &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OFFLINE}}})
	if providerStatus(t, f.d, "p").Health != "ok" {
		t.Fatal("a stranger's report was taken")
	}
}

func providerStatus(t *testing.T, d *Dispatcher, provider string) ProviderStatus {
	t.Helper()
	for _, n := range d.Status().Nodes {
		for _, p := range n.Providers {
			if p.ProviderId == provider {
				return *p
			}
		}
	}
	t.Fatalf("no provider %s", provider)
	return ProviderStatus{}
}
