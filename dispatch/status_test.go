package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The state gauges of CONTRACT §6 are read from a Status snapshot at scrape
// time.
func TestStatusCollectorGauges(t *testing.T) {
	cfg := buildCfg(t,
		[]tNode{{id: "a", provs: []tProv{{name: "p", cap: 3, long: 1}, {name: "spare", cap: 2}}}, {id: "b", provs: []tProv{{name: "q", cap: 1}}}},
		[]tModel{{name: "m", long: 100, timeout: 60, cands: []string{"a/p", "b/q"}}})
	f := newFixture(t, cfg, nil)
	if err := f.reg.Register(NewStatusCollector(f.d)); err != nil {
		t.Fatal(err)
	}
	f.up("a")
	for range 2 {
		mustAcquire(t, f.d, Request{Model: "m"})
	}
	mustAcquire(t, f.d, Request{Model: "m", PromptTokens: 100})
	f.enqueue(context.Background(), Request{Model: "m", PromptTokens: 100})
	f.enqueue(context.Background(), Request{Model: "m"})

	g := func(name string, labels map[string]string) float64 { return metricValue(t, f.reg, name, labels) }
	np := func(node, prov string) map[string]string { return map[string]string{"node": node, "provider": prov} }
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"iop_node_connected", map[string]string{"node": "a"}, 1},
		{"iop_node_connected", map[string]string{"node": "b"}, 0},
		{"iop_provider_up", np("a", "p"), 1},
		{"iop_provider_up", np("a", "spare"), 0}, // live but not dispatchable
		{"iop_provider_up", np("b", "q"), 0},
		{"iop_provider_capacity", np("a", "p"), 3},
		{"iop_provider_capacity", np("a", "spare"), 2},
		{"iop_provider_capacity", np("b", "q"), 0},
		{"iop_provider_in_flight", np("a", "p"), 3},
		{"iop_provider_long_in_flight", np("a", "p"), 1},
		{"iop_provider_queued", np("a", "p"), 2},
		{"iop_provider_long_queued", np("a", "p"), 1},
		{"iop_provider_queued", np("b", "q"), 0},
		{"iop_queue_pending", map[string]string{"model": "m"}, 2},
		{"iop_lease_acquired_total", np("a", "p"), 3},
	} {
		if got := g(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Lint-level sanity: the collector's series are all described.
	ch := make(chan *prometheus.Desc, 16)
	NewStatusCollector(f.d).Describe(ch)
	if len(ch) != 12 {
		t.Fatalf("%d descriptors", len(ch))
	}
}

// The /admin/status document has the CONTRACT §5 shape and carries no
// node address, token or transport internals.
func TestStatusJSON(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	f.up("n1")
	mustAcquire(t, f.d, Request{Model: "m"})
	b, err := json.Marshal(f.d.Status())
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := NodePayload(f.d.Config().Node("n1")).GetConfigVersion(), NodePayload(f.d.Config().Node("n2")).GetConfigVersion()
	want := `{"nodes":[{"id":"n1","connected":true,"providers":[{"provider_id":"p","type":"mock","category":"api","status":"available","health":"ok","capacity":2,"long_capacity":2,"in_flight":1,"long_in_flight":0,"queued":0,"long_queued":0,"configured_capacity":2,"configured_long_capacity":2,"waiting":0,"backend_running":0,"backend_waiting":0,"kv_cache_usage":0}],"config_version":"` + v1 + `","desired_config_version":"` + v1 + `"},` +
		`{"id":"n2","connected":false,"providers":[{"provider_id":"q","type":"mock","category":"api","status":"unavailable","health":"offline","capacity":0,"long_capacity":0,"in_flight":0,"long_in_flight":0,"queued":0,"long_queued":0,"configured_capacity":1,"configured_long_capacity":1,"waiting":0,"backend_running":0,"backend_waiting":0,"kv_cache_usage":0}],"config_version":"","desired_config_version":"` + v2 + `"}],` +
		`"models":[{"name":"m","pending":0},{"name":"m2","pending":0}]}`
	if string(b) != want {
		t.Fatalf("status JSON:\n got %s\nwant %s", b, want)
	}
	if strings.Contains(string(b), testToken) {
		t.Fatal("token in status")
	}
	// The wire snapshot carries the same figures plus the node id.
	p := f.d.Status().Nodes[0].Providers[0].Snapshot()
	if p.GetNodeId() != "n1" || p.GetProviderId() != "p" || p.GetInFlight() != 1 || p.GetCapacity() != 2 || p.GetStatus() != "available" {
		t.Fatalf("snapshot %v", p)
	}
}

// Close fails every waiter, refuses new requests and registrations.
func TestCloseFailsWaiters(t *testing.T) {
	f := queueFixture(t, 1, 0, tModel{timeout: 60})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	w1 := f.enqueue(context.Background(), Request{Model: "m"})
	w2 := f.enqueue(context.Background(), Request{Model: "m"})
	f.d.Close()
	wantErr(t, recv(t, w1).err, ErrDispatcherShutdown)
	wantErr(t, recv(t, w2).err, ErrDispatcherShutdown)
	if pendingOf(f.d.Status(), "m") != 0 {
		t.Fatal("pending after close")
	}
	_, err := f.d.Acquire(context.Background(), Request{Model: "m"})
	wantErr(t, err, ErrDispatcherShutdown)
	if resp := f.d.Register(nil, regReq("a", testToken)); resp.GetAccepted() || resp.GetRejectCode() != iop.RejectCode_REJECT_CODE_UNAVAILABLE {
		t.Fatalf("register after close: %v", resp)
	}
	if !l.Release(ReasonCompleted) {
		t.Fatal("release after close")
	}
	f.d.Close() // idempotent
}

func TestAffinityCacheBounded(t *testing.T) {
	a := newAffinityCache(2)
	k := func(p string) resKey { return resKey{"n", p} }
	a.put("s1", k("p1"))
	a.put("s2", k("p2"))
	a.put("s1", k("p3")) // refresh: s2 is now the oldest
	a.put("s3", k("p4"))
	if _, ok := a.get("s2"); ok {
		t.Fatal("oldest entry not evicted")
	}
	if got, ok := a.get("s1"); !ok || got != k("p3") {
		t.Fatalf("s1 = %v %v", got, ok)
	}
	if got, ok := a.get("s3"); !ok || got != k("p4") {
		t.Fatalf("s3 = %v %v", got, ok)
	}
	if a.order.Len() != 2 || len(a.m) != 2 {
		t.Fatalf("size %d/%d", a.order.Len(), len(a.m))
	}
}
