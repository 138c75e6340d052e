package openaicompat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

const (
	// healthTTL is how long one probe answers every Health call, so that
	// frequent snapshot polling costs vLLM at most one probe a second.
	healthTTL = time.Second
	// healthProbeTimeout bounds one /health + /metrics probe.
	healthProbeTimeout = 5 * time.Second
	// maxMetricsBody bounds the /metrics text read.
	maxMetricsBody = 16 << 20
	// degradedKVUsage: with requests waiting and the KV cache at least this
	// full, vLLM is saturated (new requests queue, running ones may be
	// preempted). It still serves, so the status is "degraded", not offline.
	degradedKVUsage = 0.95
)

// healthCache holds the last probe result; sem lets one probe run at a time.
type healthCache struct {
	sem chan struct{}

	mu  sync.Mutex
	at  time.Time
	h   adapter.Health
	gen uint64 // bumped when base_url changes: older probes are discarded
}

func (hc *healthCache) load() (adapter.Health, uint64, bool) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return hc.h, hc.gen, !hc.at.IsZero() && time.Since(hc.at) < healthTTL
}

func (hc *healthCache) store(h adapter.Health, gen uint64) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if gen == hc.gen {
		hc.h, hc.at = h, time.Now()
	}
}

func (hc *healthCache) invalidate() {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	hc.gen++
	hc.at = time.Time{}
	hc.h = adapter.Health{}
}

// Health reports vLLM's state: GET {root}/health decides ok/offline, GET
// {root}/metrics adds load. root is base_url without its /v1 suffix.
func (v VLLMInstance) Health(ctx context.Context) adapter.Health {
	hc := v.health
	if h, _, fresh := hc.load(); fresh {
		return h
	}
	select {
	case hc.sem <- struct{}{}:
	case <-ctx.Done():
		h, _, _ := hc.load()
		return h
	}
	defer func() { <-hc.sem }()
	h, gen, fresh := hc.load()
	if fresh {
		return h // another caller probed while we waited
	}
	h = v.probe(ctx)
	if ctx.Err() == nil {
		hc.store(h, gen)
	}
	return h
}

func (v VLLMInstance) probe(ctx context.Context) adapter.Health {
	c := v.cfg.Load()
	ctx, cancel := context.WithTimeout(ctx, healthProbeTimeout)
	defer cancel()

	code, _, err := v.fetch(ctx, c, c.root()+"/health")
	switch {
	case err != nil:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "health check failed: backend unreachable"}
	case code != http.StatusOK:
		return adapter.Health{Status: adapter.HealthOffline, Detail: fmt.Sprintf("health check answered %d", code)}
	}
	h := adapter.Health{Status: adapter.HealthOK}
	code, body, err := v.fetch(ctx, c, c.root()+"/metrics")
	if err != nil || code != http.StatusOK {
		h.Detail = "metrics unavailable"
		return h
	}
	m := parseVLLMMetrics(body)
	h.Running, h.Waiting, h.KVCacheUsage = m.running, m.waiting, m.kvUsage()
	if h.Waiting > 0 && h.KVCacheUsage >= degradedKVUsage {
		h.Status = adapter.HealthDegraded
		h.Detail = "KV cache full with requests waiting"
	}
	return h
}

func (v VLLMInstance) fetch(ctx context.Context, c *config, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("openaicompat: health request: %w", err)
	}
	v.authorize(req, c)
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("openaicompat: health request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return 0, nil, fmt.Errorf("openaicompat: health body: %w", err)
	}
	return resp.StatusCode, body, nil
}

// vllmMetrics is what the adapter reads from vLLM's Prometheus text.
type vllmMetrics struct {
	running, waiting float64
	kvNew, kvOld     float64 // max over label sets
	haveNew, haveOld bool
}

// kvUsage prefers vllm:kv_cache_usage_perc (vLLM V1) over the older
// vllm:gpu_cache_usage_perc: versions in between export both with the same
// value, so adding them would count it twice.
func (m vllmMetrics) kvUsage() float64 {
	kv := m.kvOld
	if m.haveNew {
		kv = m.kvNew
	}
	return min(max(kv, 0), 1)
}

// parseVLLMMetrics reads the Prometheus text exposition format. Running and
// waiting are summed over label sets (engines of a data-parallel server,
// served models); KV usage, a fraction per engine, takes the largest (the
// engine closest to preempting), so the result stays within 0..1.
// Unknown lines and malformed samples are skipped, and so are negative
// ones: none of these figures can be below zero, and a negative sample
// would cancel out another engine's load. Sums saturate at the largest
// float, so they stay finite (JSON has no infinity) however large the
// samples.
func parseVLLMMetrics(text []byte) vllmMetrics {
	var m vllmMetrics
	for len(text) > 0 {
		line := text
		text = nil
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, text = line[:i], line[i+1:]
		}
		name, value, ok := parseSample(line)
		if !ok || value < 0 {
			continue
		}
		switch name {
		case "vllm:num_requests_running":
			m.running = min(m.running+value, math.MaxFloat64)
		case "vllm:num_requests_waiting":
			m.waiting = min(m.waiting+value, math.MaxFloat64)
		case "vllm:kv_cache_usage_perc":
			m.kvNew = max(m.kvNew, value)
			m.haveNew = true
		case "vllm:gpu_cache_usage_perc":
			m.kvOld = max(m.kvOld, value)
			m.haveOld = true
		}
	}
	return m
}

// parseSample splits one sample line `name{labels} value [timestamp]`.
// Label values may contain spaces, '}' and escaped quotes.
func parseSample(line []byte) (string, float64, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] == '#' {
		return "", 0, false
	}
	end := bytes.IndexAny(line, "{ \t")
	if end <= 0 {
		return "", 0, false
	}
	name := string(line[:end])
	rest := line[end:]
	if rest[0] == '{' {
		closing := labelsEnd(rest)
		if closing < 0 {
			return "", 0, false
		}
		rest = rest[closing+1:]
	}
	fields := bytes.Fields(rest)
	if len(fields) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(string(fields[0]), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return "", 0, false
	}
	return name, v, true
}

// labelsEnd returns the index of the '}' closing the label set that p
// starts with, or -1.
func labelsEnd(p []byte) int {
	inQuote := false
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case inQuote && c == '\\':
			i++ // skip the escaped byte
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return i
		}
	}
	return -1
}
