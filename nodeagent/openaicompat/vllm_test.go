package openaicompat

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// vLLM 0.6 (V0 engine) /metrics excerpt: gpu_cache_usage_perc, model_name
// label only.
const vllmMetricsV0 = `# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12811.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="False",gpu_memory_utilization="0.9",num_cpu_blocks="2048",num_gpu_blocks="7216",sliding_window="None",swap_space_bytes="4294967296"} 1.0
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-2-7b-chat-hf"} 3.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="meta-llama/Llama-2-7b-chat-hf"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="meta-llama/Llama-2-7b-chat-hf"} 2.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="meta-llama/Llama-2-7b-chat-hf"} 0.9712
# HELP vllm:cpu_cache_usage_perc CPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:cpu_cache_usage_perc gauge
vllm:cpu_cache_usage_perc{model_name="meta-llama/Llama-2-7b-chat-hf"} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-2-7b-chat-hf"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-2-7b-chat-hf"} 41.0
`

// vLLM V1 engine (≥ 0.10) with two data-parallel engines:
// kv_cache_usage_perc, engine + model_name labels.
const vllmMetricsV1 = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 2.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.5
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 825.0
`

// vLLM 0.10.x during the rename exports both KV gauges with one value.
const vllmMetricsBothNames = `vllm:num_requests_running{engine="0",model_name="m"} 4.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.4
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.4
`

type fakeVLLM struct {
	healthHits  atomic.Int32
	healthCode  atomic.Int32
	metrics     atomic.Value // string
	metricsPath atomic.Value // string
}

func newFakeVLLM(t *testing.T, metrics string) (*fakeVLLM, string) {
	f := &fakeVLLM{}
	f.healthCode.Store(http.StatusOK)
	f.metrics.Store(metrics)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			f.healthHits.Add(1)
			w.WriteHeader(int(f.healthCode.Load()))
		case "/metrics":
			f.metricsPath.Store(r.URL.Path)
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			_, _ = io.WriteString(w, f.metrics.Load().(string))
		default:
			http.NotFound(w, r)
		}
	})
	return f, srv.URL
}

func vllmHealth(t *testing.T, base string) (adapter.HealthReporter, *Instance) {
	t.Helper()
	in := newTestInstance(t, TypeVLLM, testConfig(base))
	return VLLMInstance{in}, in
}

func TestVLLMHealthMetricsV0(t *testing.T) {
	_, base := newFakeVLLM(t, vllmMetricsV0)
	hr, _ := vllmHealth(t, base)
	h := hr.Health(context.Background())
	if h.Running != 3 || h.Waiting != 2 || h.KVCacheUsage != 0.9712 {
		t.Fatalf("health %+v", h)
	}
	if h.Status != adapter.HealthDegraded {
		t.Fatalf("status %q, want degraded (waiting with KV cache ≥ 95%%)", h.Status)
	}
}

func TestVLLMHealthMetricsV1(t *testing.T) {
	_, base := newFakeVLLM(t, vllmMetricsV1)
	hr, _ := vllmHealth(t, base)
	h := hr.Health(context.Background())
	if h.Status != adapter.HealthOK || h.Running != 3 || h.Waiting != 0 || h.KVCacheUsage != 0.5 {
		t.Fatalf("health %+v", h)
	}
}

func TestVLLMMetricsBothKVNames(t *testing.T) {
	m := parseVLLMMetrics([]byte(vllmMetricsBothNames))
	if m.running != 4 || m.waiting != 1 || m.kvUsage() != 0.4 {
		t.Fatalf("metrics %+v kv %v", m, m.kvUsage())
	}
}

func TestParseSampleLabels(t *testing.T) {
	cases := map[string]float64{
		`vllm:num_requests_running 7`:                                 7,
		`vllm:num_requests_running{a="x} y",b="q\"}"} 2.5 1727000000`: 2.5,
		`  vllm:num_requests_running{} +1e1`:                          10,
	}
	for line, want := range cases {
		name, v, ok := parseSample([]byte(line))
		if !ok || name != "vllm:num_requests_running" || v != want {
			t.Errorf("%q: %q %v %v", line, name, v, ok)
		}
	}
	for _, bad := range []string{`# TYPE x gauge`, `vllm:x{a="1"`, `vllm:x NaN`, `vllm:x`, ``} {
		if _, _, ok := parseSample([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestVLLMHealthOfflineAndCached(t *testing.T) {
	f, base := newFakeVLLM(t, vllmMetricsV1)
	hr, in := vllmHealth(t, base)
	for range 5 {
		if h := hr.Health(context.Background()); h.Status != adapter.HealthOK {
			t.Fatalf("health %+v", h)
		}
	}
	if n := f.healthHits.Load(); n != 1 {
		t.Fatalf("%d probes within the cache TTL, want 1", n)
	}
	if p, _ := f.metricsPath.Load().(string); p != "/metrics" {
		t.Fatalf("metrics fetched from %q, want the root, not /v1", p)
	}

	// A new base_url invalidates the cache at once.
	f2, base2 := newFakeVLLM(t, vllmMetricsV1)
	f2.healthCode.Store(http.StatusInternalServerError)
	if err := in.Reconfigure(testConfigType(base2, TypeVLLM)); err != nil {
		t.Fatal(err)
	}
	if h := hr.Health(context.Background()); h.Status != adapter.HealthOffline || h.Running != 0 {
		t.Fatalf("health %+v, want offline", h)
	}
}

func TestVLLMHealthUnreachable(t *testing.T) {
	hr, _ := vllmHealth(t, "http://127.0.0.1:1")
	if h := hr.Health(context.Background()); h.Status != adapter.HealthOffline {
		t.Fatalf("health %+v", h)
	}
}

func TestVLLMHealthWithoutMetrics(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	})
	hr, _ := vllmHealth(t, srv.URL)
	if h := hr.Health(context.Background()); h.Status != adapter.HealthOK || h.Detail == "" {
		t.Fatalf("health %+v", h)
	}
}

func testConfigType(base, kind string) *iop.AdapterConfig {
	c := testConfig(base)
	c.Type = kind
	return c
}
