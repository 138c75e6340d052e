package vllmsim

import (
	"net/http"
	"strconv"
	"strings"
)

// metricDef is one exported family. Names and help follow vLLM V1's
// Prometheus metrics; counters are written as prometheus_client (Python)
// writes them in the text format: the family named with its _total suffix.
type metricDef struct {
	name, typ, help string
	value           func(Stats) float64
}

var metricDefs = []metricDef{
	{"vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
		func(s Stats) float64 { return float64(s.Running) }},
	{"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
		func(s Stats) float64 { return float64(s.Waiting) }},
	{"vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
		func(s Stats) float64 { return s.KVUsage }},
	{"vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: use vllm:kv_cache_usage_perc.",
		func(s Stats) float64 { return s.KVUsage }},
	{"vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
		func(s Stats) float64 { return float64(s.PrefixQueries) }},
	{"vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
		func(s Stats) float64 { return float64(s.PrefixHits) }},
	{"vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
		func(s Stats) float64 { return float64(s.Preemptions) }},
	{"vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
		func(s Stats) float64 { return float64(s.PromptTokens) }},
	{"vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
		func(s Stats) float64 { return float64(s.GenerationTokens) }},
}

// labelEscaper escapes a Prometheus label value.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func (h *routes) metrics(w http.ResponseWriter, _ *http.Request) {
	st := h.s.Stats()
	labels := `{engine="0",model_name="` + labelEscaper.Replace(h.s.cfg.Model) + `"} `
	b := make([]byte, 0, 2048)
	for _, d := range metricDefs {
		b = append(b, "# HELP "+d.name+" "+d.help+"\n# TYPE "+d.name+" "+d.typ+"\n"+d.name+labels...)
		b = strconv.AppendFloat(b, d.value(st), 'g', -1, 64)
		b = append(b, '\n')
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b)
}
