package openaicompat

import (
	"context"
	"encoding/json"
	"math"
	"testing"
)

// Every sample is finite, but their sum need not be: two engines reporting
// 1e308 running requests made Running +Inf, which no JSON encoder takes
// (the node's providers command failed whole on it), and a negative sample
// cancelled out real load. Counts and fractions are never negative.
func TestHostileMetricsStayFiniteAndNonNegative(t *testing.T) {
	_, base := newFakeVLLM(t, `vllm:num_requests_running{engine="0"} 1e308
vllm:num_requests_running{engine="1"} 1.7e308
vllm:num_requests_waiting{engine="0"} 3
vllm:num_requests_waiting{engine="1"} -3
vllm:kv_cache_usage_perc{engine="0"} -0.5
`)
	hr, _ := vllmHealth(t, base)
	h := hr.Health(context.Background())
	for name, v := range map[string]float64{"running": h.Running, "waiting": h.Waiting, "kv": h.KVCacheUsage} {
		if math.IsInf(v, 0) || math.IsNaN(v) || v < 0 {
			t.Errorf("%s = %v, want finite and non-negative", name, v)
		}
	}
	if h.Running != math.MaxFloat64 || h.Waiting != 3 {
		t.Errorf("running %v waiting %v, want the largest float and 3", h.Running, h.Waiting)
	}
	if _, err := json.Marshal(map[string]float64{"running": h.Running, "waiting": h.Waiting}); err != nil {
		t.Errorf("health does not encode: %v", err)
	}
}
