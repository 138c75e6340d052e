package config

import (
	"strings"
	"testing"
	"time"
)

func minimalEdge() *Edge {
	return &Edge{
		Nodes:  []NodeSpec{{ID: "a", Token: "t", Providers: []ProviderSpec{{Name: "p", Type: "mock", Capacity: 1}}}},
		Models: []ModelSpec{{Name: "m", Providers: []ModelProvider{{Node: "a", Provider: "p", Target: "x"}}}},
	}
}

// The listener, timeout and grace keys get their documented defaults.
func TestEdgeDefaults(t *testing.T) {
	c := minimalEdge()
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	checks := map[string][2]any{
		"listen.max_pending_handshakes": {c.Listen.MaxPendingHandshakes, 64},
		"listen.max_node_conns":         {c.Listen.MaxNodeConns, 1024},
		"listen.max_http_conns":         {c.Listen.MaxHTTPConns, 16384},
		"limits.read_header_timeout":    {l.ReadHeaderTimeoutSec, 10},
		"limits.read_timeout_sec":       {l.ReadTimeoutSec, 120},
		"limits.idle_timeout_sec":       {l.IdleTimeoutSec, 120},
		"limits.max_body_bytes":         {l.MaxBodyBytes, int64(8 << 20)},
		"stream idle timeout":           {l.StreamIdleTimeout(), 300 * time.Second},
		"offline grace":                 {c.Models[0].OfflineGrace(), 10 * time.Second},
		"runtime.gc_heap_floor_mb":      {c.Runtime.GCHeapFloorBytes(), uint64(64 << 20)},
	}
	for k, v := range checks {
		if v[0] != v[1] {
			t.Errorf("%s = %v, want %v", k, v[0], v[1])
		}
	}
}

// Zero keeps its documented meaning where it has one: no stream idle
// bound, no fast path, no heap floor.
func TestEdgeZeroMeans(t *testing.T) {
	c := minimalEdge()
	zero, zeroF, zeroFloor := 0, 0.0, 0
	c.Limits.StreamIdleTimeoutSec = &zero
	c.Models[0].OfflineGraceSec = &zeroF
	c.Runtime.GCHeapFloorMB = &zeroFloor
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.Limits.StreamIdleTimeout() != 0 || c.Models[0].OfflineGrace() != 0 || c.Runtime.GCHeapFloorBytes() != 0 {
		t.Fatalf("zero became %v / %v / %v", c.Limits.StreamIdleTimeout(), c.Models[0].OfflineGrace(), c.Runtime.GCHeapFloorBytes())
	}
}

// Every problem is reported at once, including a body limit the wire
// cannot carry.
func TestEdgeProblemsReportedTogether(t *testing.T) {
	c := minimalEdge()
	neg, negF := -1, -1.0
	c.Runtime.GCHeapFloorMB = &neg
	c.Limits.MaxBodyBytes = 64 << 20
	c.Limits.ReadTimeoutSec = -5
	c.Limits.StreamIdleTimeoutSec = &neg
	c.Listen.MaxPendingHandshakes = -1
	c.Models[0].OfflineGraceSec = &negF
	err := c.Normalize()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"limits.max_body_bytes 67108864 exceeds what the node wire carries",
		"limits.read_timeout_sec must be positive",
		"limits.stream_idle_timeout_sec must not be negative",
		"listen.max_pending_handshakes must be positive",
		"offline_grace_sec",
		"runtime.gc_heap_floor_mb must be between 0 and 16384",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}

func TestRoutingFailoverAndPriorityKeys(t *testing.T) {
	c := minimalEdge()
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if m := c.Models[0]; m.Routing != "least_load" || m.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("defaults: routing %q, max_attempts %d", m.Routing, m.MaxAttempts)
	}
	c = minimalEdge()
	c.Models[0].Routing, c.Models[0].MaxAttempts = "round_robin", 99
	c.Auth.APIKeys = []string{"k1"}
	c.Auth.KeyPriorities = []KeyPriority{{Key: "k2", Priority: 1}, {Key: "k1", Priority: 11}}
	err := c.Normalize()
	for _, want := range []string{"routing \"round_robin\"", "max_attempts must be between 1 and 8", "key_priorities[0].key is not one of", "key_priorities[1].priority must be between -10 and 10"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
}
