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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/openaicompat"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TypeName is the AdapterConfig.type this package serves.
const TypeName = "llamacpp"

const (
	// healthTTL: one probe answers every Health call for this long, so
	// frequent status polling costs llama-server at most one probe a second.
	healthTTL = time.Second
	// probeTimeout bounds one /health + /slots (or /metrics) probe.
	probeTimeout = 5 * time.Second
	// maxProbeBody bounds what a probe reads (/slots lists every slot with
	// its sampling parameters: a few KiB per slot).
	maxProbeBody = 4 << 20
)

// Instance is one llama-server provider.
type Instance struct {
	*openaicompat.Instance
	client *http.Client

	mu   sync.Mutex
	root string         // guarded by mu: base_url without its /v1 suffix
	at   time.Time      // guarded by mu: when last was probed
	last adapter.Health // guarded by mu
	sem  chan struct{}  // one probe at a time
}

var (
	_ adapter.Instance           = (*Instance)(nil)
	_ adapter.Reconfigurer       = (*Instance)(nil)
	_ adapter.HealthReporter     = (*Instance)(nil)
	_ adapter.ModelLister        = (*Instance)(nil)
	_ adapter.CapabilityReporter = (*Instance)(nil)
)

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
	inner, err := openaicompat.New(asOpenAICompat(cfg), env)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: %w", err)
	}
	root, err := rootOf(cfg.GetBaseUrl())
	if err != nil {
		return nil, err
	}
	return &Instance{
		Instance: inner.(*openaicompat.Instance),
		client:   &http.Client{Timeout: probeTimeout, CheckRedirect: adapter.NoRedirect},
		root:     root,
		sem:      make(chan struct{}, 1),
	}, nil
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

// rootOf is llama-server's root URL: base_url without a trailing /v1 (its
// /health, /slots and /metrics live at the root).
func rootOf(base string) (string, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("llamacpp: base_url %q must be an http(s) URL", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/v1")
	return strings.TrimRight(u.String(), "/"), nil
}

// Reconfigure applies a same-type change in place.
func (in *Instance) Reconfigure(cfg *iop.AdapterConfig) error {
	root, err := rootOf(cfg.GetBaseUrl())
	if err != nil {
		return err
	}
	if err := in.Instance.Reconfigure(asOpenAICompat(cfg)); err != nil {
		return fmt.Errorf("llamacpp: %w", err)
	}
	in.mu.Lock()
	in.root, in.at, in.last = root, time.Time{}, adapter.Health{}
	in.mu.Unlock()
	return nil
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
func (in *Instance) Health(ctx context.Context) adapter.Health {
	in.mu.Lock()
	if !in.at.IsZero() && time.Since(in.at) < healthTTL {
		h := in.last
		in.mu.Unlock()
		return h
	}
	root := in.root
	in.mu.Unlock()
	select {
	case in.sem <- struct{}{}:
		defer func() { <-in.sem }()
	case <-ctx.Done():
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.last
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	h := in.probe(ctx, root)
	in.mu.Lock()
	if in.root == root {
		in.last, in.at = h, time.Now()
	}
	in.mu.Unlock()
	return h
}

func (in *Instance) probe(ctx context.Context, root string) adapter.Health {
	status, _, err := in.get(ctx, root+"/health")
	switch {
	case err != nil:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "llama-server does not answer /health"}
	case status == http.StatusServiceUnavailable:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "llama-server is loading its model"}
	case status != http.StatusOK:
		return adapter.Health{Status: adapter.HealthOffline, Detail: "llama-server /health answered HTTP " + strconv.Itoa(status)}
	}
	h := adapter.Health{Status: adapter.HealthOK}
	if status, body, err := in.get(ctx, root+"/slots"); err == nil && status == http.StatusOK {
		var slots []struct {
			IsProcessing bool `json:"is_processing"`
		}
		if json.Unmarshal(body, &slots) == nil && len(slots) > 0 {
			busy := 0
			for _, s := range slots {
				if s.IsProcessing {
					busy++
				}
			}
			h.Running = float64(busy)
			h.Detail = fmt.Sprintf("%d of %d slots processing", busy, len(slots))
			if busy == len(slots) {
				h.Status = adapter.HealthDegraded
			}
			return h
		}
	}
	if status, body, err := in.get(ctx, root+"/metrics"); err == nil && status == http.StatusOK {
		m := parseMetrics(body)
		h.Running, h.Waiting, h.KVCacheUsage = m["llamacpp:requests_processing"], m["llamacpp:requests_deferred"], m["llamacpp:kv_cache_usage_ratio"]
		h.Detail = fmt.Sprintf("%g processing, %g deferred", h.Running, h.Waiting)
		if h.Waiting > 0 {
			h.Status = adapter.HealthDegraded
		}
	}
	return h
}

// get fetches url (bounded in time and size).
func (in *Instance) get(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	return resp.StatusCode, body, err
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
		// NaN and ±Inf are valid exposition values but no load figure: they
		// would also make the providers command's JSON unencodable.
		if v, err := strconv.ParseFloat(fields[1], 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[name] = v
		}
	}
	return out
}
