// Package llamacpp is the adapter for llama.cpp's llama-server: its
// OpenAI-compatible endpoints (chat completions, completions, embeddings)
// are served exactly as the openai_compat adapter serves any such backend,
// on the tunnel and run paths; on top, it reports llama-server's own health
// (GET /health) and load (GET /slots, or GET /metrics when slots are
// disabled).
package llamacpp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	iopconfig "github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/openaicompat"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TypeName is the AdapterConfig.type this package serves.
const TypeName = iopconfig.ProviderTypeLlamaCpp

const (
	// healthTTL: one probe answers every Health call for this long, so
	// frequent status polling costs llama-server at most one probe a second.
	healthTTL = time.Second
	// probeTimeout bounds one /health + /slots (or /metrics) probe.
	probeTimeout = 5 * time.Second
	// maxProbeBody bounds what a probe reads (/slots lists every slot with
	// its sampling parameters: a few KiB per slot).
	maxProbeBody = 4 << 20
	// maxProbeHeader bounds a probe answer's status line and headers, as
	// for every provider request.
	maxProbeHeader = 256 << 10
)

// Instance is one llama-server provider.
type Instance struct {
	*openaicompat.Instance
	client *http.Client
	getenv func(string) string
	// base is cancelled by Close: it ends a probe in flight, and no probe
	// starts after it.
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup // the probe goroutine

	mu     sync.Mutex
	target target         // guarded by mu: where and how to probe
	gen    uint64         // guarded by mu: bumped by Reconfigure
	at     time.Time      // guarded by mu: when last was probed
	last   adapter.Health // guarded by mu
	// probing is closed when the probe in flight ends (nil: none); cancel
	// ends that probe. Guarded by mu.
	probing chan struct{}
	cancel  context.CancelFunc
}

var (
	_ adapter.Instance           = (*Instance)(nil)
	_ adapter.Reconfigurer       = (*Instance)(nil)
	_ adapter.HealthReporter     = (*Instance)(nil)
	_ adapter.ModelLister        = (*Instance)(nil)
	_ adapter.CapabilityReporter = (*Instance)(nil)
)

// target is what a probe needs from the config: llama-server's root URL
// and what authorizes a request to it (with --api-key, llama-server
// answers /slots and /metrics only to the key; /health is public).
type target struct {
	root      string // base_url without its /v1 suffix
	headers   http.Header
	apiKeyEnv string
}

// Capabilities: those of any OpenAI-compatible server, with llama-server's
// own health and load source.
func (in *Instance) Capabilities() *iop.AdapterCapabilities {
	c := in.Instance.Capabilities()
	c.HealthSource, c.Category = "llama-server /health + /slots or /metrics", adapter.CategoryLocalInference
	return c
}

// New builds a llamacpp instance.
func New(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	if t := cfg.GetType(); t != "" && t != TypeName {
		return nil, fmt.Errorf("llamacpp: type %q is not %q", t, TypeName)
	}
	inner, err := openaicompat.NewLlamaServer(asOpenAICompat(cfg), env)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: %w", err)
	}
	t, err := targetOf(cfg)
	if err != nil {
		return nil, err
	}
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	base, stop := context.WithCancel(context.Background())
	return &Instance{
		Instance: inner,
		client:   &http.Client{Transport: newProbeTransport(), Timeout: probeTimeout, CheckRedirect: adapter.NoRedirect},
		getenv:   getenv,
		base:     base,
		stop:     stop,
		target:   t,
	}, nil
}

// newProbeTransport is the probes' own transport, held to the limits of
// every provider request (SECURITY.md, "Node limits"): 10 s to connect,
// 256 KiB of response headers. Its idle connections are closed by Close.
func newProbeTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxProbeHeader,
	}
}

// asOpenAICompat is cfg as the openai_compat adapter validates it: the same
// settings under that type.
func asOpenAICompat(cfg *iop.AdapterConfig) *iop.AdapterConfig {
	c := proto.Clone(cfg).(*iop.AdapterConfig)
	c.Type = openaicompat.TypeOpenAICompat
	if c.GetName() == "" {
		c.Name = TypeName
	}
	return c
}

// targetOf is what a probe of cfg's server needs. cfg's headers were
// validated by openaicompat (no Authorization among them).
func targetOf(cfg *iop.AdapterConfig) (target, error) {
	root, err := rootOf(cfg.GetBaseUrl())
	if err != nil {
		return target{}, err
	}
	t := target{root: root, headers: make(http.Header), apiKeyEnv: strings.TrimSpace(cfg.GetApiKeyEnv())}
	for k, v := range cfg.GetHeaders() {
		t.headers.Set(k, v)
	}
	return t, nil
}

// rootOf is llama-server's root URL: base_url without a trailing /v1 (its
// /health, /slots and /metrics live at the root).
func rootOf(base string) (string, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("llamacpp: base_url %q must be an http(s) URL", base)
	}
	// As written: an escaped character before "/v1" stays escaped.
	path := strings.TrimSuffix(u.EscapedPath(), "/v1")
	return strings.TrimRight(u.Scheme+"://"+u.Host+path, "/"), nil
}

// Reconfigure applies a same-type change in place.
func (in *Instance) Reconfigure(cfg *iop.AdapterConfig) error {
	t, err := targetOf(cfg)
	if err != nil {
		return err
	}
	if err := in.Instance.Reconfigure(asOpenAICompat(cfg)); err != nil {
		return fmt.Errorf("llamacpp: %w", err)
	}
	in.mu.Lock()
	if in.target.root != t.root {
		in.client.CloseIdleConnections()
	}
	// What was learnt, or is being probed, under the old settings no
	// longer holds: the next Health probes afresh.
	in.target, in.at, in.last = t, time.Time{}, adapter.Health{}
	in.gen++
	if in.cancel != nil {
		in.cancel()
	}
	in.probing, in.cancel = nil, nil
	in.mu.Unlock()
	return nil
}

// Close ends a probe in flight and releases the probes' idle connections,
// then those of the OpenAI-compatible paths.
func (in *Instance) Close() error {
	in.mu.Lock()
	in.stop()
	in.mu.Unlock()
	in.wg.Wait()
	in.client.CloseIdleConnections()
	return in.Instance.Close()
}

// Health reports llama-server's state:
//
//   - GET /health: 200 is ok; 503 (the model is still loading) is offline,
//     since nothing can be served yet; no answer is offline.
//   - GET /slots: Running is the number of slots processing a task out of
//     all slots; a server with every slot busy is degraded (new requests
//     wait inside llama-server). When slots are disabled (501), GET
//     /metrics (llama-server --metrics) gives llamacpp:requests_processing,
//     llamacpp:requests_deferred and llamacpp:kv_cache_usage_ratio.
//
// One probe at a time runs, on its own goroutine and deadline (probeTimeout),
// whatever its callers' deadlines: every caller while it runs waits for it,
// and a caller whose context ends first gets the last result (unknown before
// the first), so a short deadline of a caller is never taken for a server
// that does not answer.
func (in *Instance) Health(ctx context.Context) adapter.Health {
	in.mu.Lock()
	if !in.at.IsZero() && time.Since(in.at) < healthTTL {
		h := in.last
		in.mu.Unlock()
		return h
	}
	done := in.probing
	if done == nil && in.base.Err() == nil {
		done = make(chan struct{})
		pctx, cancel := context.WithTimeout(in.base, probeTimeout)
		in.probing, in.cancel = done, cancel
		in.wg.Add(1)
		go in.probeAndStore(pctx, cancel, in.target, in.gen, done)
	}
	in.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.last
}

// probeDoneHook, nil in production, runs when a probe has its result,
// before it is stored: a test holds an old probe there to end it after a
// newer one began, an order nothing outside can force.
var probeDoneHook func()

// probeAndStore runs one probe and keeps its result, unless Reconfigure or
// Close came meanwhile.
func (in *Instance) probeAndStore(ctx context.Context, cancel context.CancelFunc, t target, gen uint64, done chan struct{}) {
	defer in.wg.Done()
	h := in.probe(ctx, t)
	cancel()
	if probeDoneHook != nil {
		probeDoneHook()
	}
	in.mu.Lock()
	if gen == in.gen && in.base.Err() == nil {
		in.last, in.at = h, time.Now()
	}
	if in.probing == done {
		in.probing, in.cancel = nil, nil
	}
	in.mu.Unlock()
	close(done)
}

func (in *Instance) probe(ctx context.Context, t target) adapter.Health {
	status, _, err := in.get(ctx, t, "/health")
	switch {
	case err != nil:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "llama-server does not answer /health"}
	case status == http.StatusServiceUnavailable:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "llama-server is loading its model"}
	case status != http.StatusOK:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "llama-server /health answered HTTP " + strconv.Itoa(status)}
	}
	h := adapter.Health{Status: adapter.HealthOK}
	if status, body, err := in.get(ctx, t, "/slots"); err == nil && status == http.StatusOK {
		if busy, total, ok := parseSlots(body); ok {
			h.Running = float64(busy)
			h.Detail = fmt.Sprintf("%d of %d slots processing", busy, total)
			if busy == total {
				h.Status = adapter.HealthDegraded
			}
			return h
		}
	}
	if status, body, err := in.get(ctx, t, "/metrics"); err == nil && status == http.StatusOK {
		m := parseMetrics(body)
		h.Running, h.Waiting, h.KVCacheUsage = m["llamacpp:requests_processing"], m["llamacpp:requests_deferred"], m["llamacpp:kv_cache_usage_ratio"]
		h.Detail = fmt.Sprintf("%g processing, %g deferred", h.Running, h.Waiting)
		if h.Waiting > 0 {
			h.Status = adapter.HealthDegraded
		}
	}
	return h
}

// parseSlots counts the slots of a /slots answer and those processing a
// task; ok is false for anything but a non-empty JSON array of slots.
// llama-server says is_processing since its slot states were reworked
// (September 2024); builds from before give only a numeric state, 0 idle
// and 1 processing, which counts where is_processing is absent.
func parseSlots(body []byte) (busy, total int, ok bool) {
	var slots []struct {
		IsProcessing *bool           `json:"is_processing"`
		State        json.RawMessage `json:"state"`
	}
	if json.Unmarshal(body, &slots) != nil || len(slots) == 0 {
		return 0, 0, false
	}
	for _, s := range slots {
		if s.IsProcessing != nil {
			if *s.IsProcessing {
				busy++
			}
			continue
		}
		// A state that is no number (none of llama-server's) is no count.
		if v, err := strconv.ParseFloat(string(s.State), 64); err == nil && v != 0 {
			busy++
		}
	}
	return busy, len(slots), true
}

// get fetches root+path (bounded in time and size) with the configured
// headers and key.
func (in *Instance) get(ctx context.Context, t target, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.root+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("llamacpp: probe request: %w", err)
	}
	for k, vs := range t.headers {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Del("Authorization")
	if t.apiKeyEnv != "" {
		if key := in.getenv(t.apiKeyEnv); key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("llamacpp: probe: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return 0, nil, fmt.Errorf("llamacpp: probe body: %w", err)
	}
	return resp.StatusCode, body, nil
}

// parseMetrics reads the unlabelled-or-labelled samples of a Prometheus text
// exposition into name -> value (the last sample of a name wins; llama-server
// exports one series per name). Non-finite values are dropped.
func parseMetrics(b []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		name := fields[0]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		if name == "" {
			continue // labels without a name: not a sample
		}
		// NaN and ±Inf are valid exposition values but no load figure: they
		// would also make the providers command's JSON unencodable.
		if v, err := strconv.ParseFloat(fields[1], 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[name] = v
		}
	}
	return out
}
