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
