package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

// The node samples its vLLM's /metrics and pushes the figures: they show in
// /admin/status and as metrics well before the edge's 5 s health poll
// could have fetched them.
func TestLoadReportsReachStatusAndMetrics(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u, func(c *config.Edge) {
		v := 0.2
		c.Nodes[0].LoadReportIntervalSec = &v
	})
	deadline := time.Now().Add(3 * time.Second)
	for {
		kv := metric(t, s.Registry, "iop_backend_kv_cache_usage", map[string]string{"node": nodeID, "provider": "vllm-main"})
		if kv == 0.1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("iop_backend_kv_cache_usage = %v after 3 s, want the backend's 0.1", kv)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range s.Dispatcher.Status().Nodes {
		for _, p := range n.Providers {
			if p.ProviderId == "vllm-main" && p.KVCacheUsage != 0.1 {
				t.Fatalf("status kv_cache_usage = %v", p.KVCacheUsage)
			}
		}
	}
}

// A backend its node reports offline for longer than offline_grace_sec is
// not waited for: the request fails at once with 503
// no_provider_available.
func TestOfflineBackendFailsFast(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", "http://"+closedPort(t)+"/v1")},
		modelOn("qwen-7b", "vllm-main", target))
	interval, grace := 0.2, 0.3
	cfg.Nodes[0].LoadReportIntervalSec = &interval
	cfg.Models[0].OfflineGraceSec = &grace
	cfg.Models[0].QueueTimeoutSec = 60
	e, _ := startStack(t, cfg)
	deadline := time.Now().Add(5 * time.Second)
	for e.Dispatcher.Status().Nodes[0].Providers[0].Health != "offline" {
		if time.Now().After(deadline) {
			t.Fatal("the unreachable backend was never reported offline")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond) // past the grace
	start := time.Now()
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusServiceUnavailable, "no_provider_available")
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("answered after %s, not at once", waited)
	}
}
