package dispatch

import (
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A KV cache usage above 1 (a broken backend or node) reads as a full
// cache, 1, in the status as in routing: the status never shows a
// fraction over one.
func TestKVUsageAboveOneReadsAsFull(t *testing.T) {
	f := routingFixture(t, "least_load")
	c := f.d.nodes["a"].owner
	f.d.Load(c, &iop.LoadReport{Providers: []*iop.ProviderLoad{
		{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK, KvCacheUsage: 7.5},
	}})
	if st := providerStatus(t, f.d, "p"); st.KVCacheUsage != 1 {
		t.Fatalf("KV cache usage of p = %v, want 1", st.KVCacheUsage)
	}
}

// Nodes that push load reports are not also polled for their providers'
// health: only a ready node not heard from for three poll intervals is
// (c never connected).
func TestHealthPollSkipsNodesThatReportLoad(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}, {id: "c", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p", "b/p", "c/p"}}})
	f := newFixture(t, cfg, nil)
	f.up("a")
	f.up("b")
	const every = time.Minute
	f.d.mu.Lock()
	f.d.nodes["a"].lastLoad = time.Now()
	f.d.nodes["b"].lastLoad = time.Now().Add(-4 * every)
	f.d.mu.Unlock()
	polled := f.d.pollNodes(every)
	if _, ok := polled["a"]; ok {
		t.Fatalf("the node that reports load is polled: %v", polled)
	}
	if _, ok := polled["b"]; !ok || len(polled) != 1 {
		t.Fatalf("polled %v, want only b, the ready node silent for four intervals", polled)
	}
}
