package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

const (
	// healthTTL is how long a probe result is reused: snapshots may ask
	// often, and Ollama should not see a probe per snapshot.
	healthTTL = time.Second
	// healthProbeTimeout bounds one probe, whatever the caller's deadline.
	healthProbeTimeout = 3 * time.Second
	// maxSmallBody bounds /api/tags and /api/version responses.
	maxSmallBody = 8 << 20
)

// Models lists the models Ollama has locally (GET /api/tags), by the name
// RunRequest.target uses (e.g. "llama3.2:latest").
func (o *Instance) Models(ctx context.Context) ([]string, error) {
	cfg := o.cfg.Load()
	resp, err := o.do(ctx, cfg, http.MethodGet, "/api/tags", nil)
	if err != nil {
		return nil, fmt.Errorf("ollama: list models: %w", err)
	}
	defer resp.Body.Close()
	var tags struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSmallBody)).Decode(&tags); err != nil {
		return nil, fmt.Errorf("ollama: decode model list: %w", err)
	}
	names := make([]string, 0, len(tags.Models))
	for _, m := range tags.Models {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		if name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}

// healthCache memoizes the last probe for healthTTL. gen is bumped by
// Reconfigure so a probe of the old base URL is not cached as the new one's.
type healthCache struct {
	// probe (one slot) serializes probes, so concurrent callers share one;
	// a caller whose deadline ends while another probes gets the last
	// value instead of waiting out that probe.
	probe chan struct{}
	mu    sync.Mutex // guards the fields below
	gen   uint64
	at    time.Time
	val   adapter.Health
}

func (h *healthCache) get(now time.Time) (adapter.Health, uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fresh := !h.at.IsZero() && now.Sub(h.at) < healthTTL
	return h.val, h.gen, fresh
}

func (h *healthCache) put(gen uint64, at time.Time, v adapter.Health) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen == h.gen {
		h.at, h.val = at, v
	}
}

func (h *healthCache) invalidate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	h.at = time.Time{}
}

// Health reports "ok" when Ollama answers GET /api/version (or, for
// servers or proxies without it, GET /) with a 2xx, else "offline".
func (o *Instance) Health(ctx context.Context) adapter.Health {
	if v, _, fresh := o.health.get(time.Now()); fresh {
		return v
	}
	select {
	case o.health.probe <- struct{}{}:
		defer func() { <-o.health.probe }()
	case <-ctx.Done():
		v, _, _ := o.health.get(time.Now())
		return v
	}
	// Another caller may have probed while this one waited.
	v, gen, fresh := o.health.get(time.Now())
	if fresh {
		return v
	}
	v = o.probe(ctx)
	if ctx.Err() == nil {
		// A probe cut short by its caller says nothing about Ollama, so it
		// must not be served to the next caller as "offline".
		o.health.put(gen, time.Now(), v)
	}
	return v
}

func (o *Instance) probe(ctx context.Context) adapter.Health {
	ctx, cancel := context.WithTimeout(ctx, healthProbeTimeout)
	defer cancel()
	cfg := o.cfg.Load()
	resp, err := o.do(ctx, cfg, http.MethodGet, "/api/version", nil)
	var ae *adapter.Error
	if errors.As(err, &ae) && ae.HTTPStatus == http.StatusNotFound {
		resp, err = o.do(ctx, cfg, http.MethodGet, "/", nil)
	}
	if err != nil {
		return adapter.Health{Status: adapter.HealthOffline, Detail: healthDetail(err)}
	}
	defer resp.Body.Close()
	var ver struct {
		Version string `json:"version"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxSmallBody)).Decode(&ver)
	h := adapter.Health{Status: adapter.HealthOK}
	if ver.Version != "" {
		h.Detail = "ollama " + ver.Version
	}
	return h
}

// healthDetail summarizes a probe failure for operators.
func healthDetail(err error) string {
	var ae *adapter.Error
	switch {
	case errors.As(err, &ae) && ae.HTTPStatus != 0:
		return fmt.Sprintf("HTTP %d: %s", ae.HTTPStatus, ae.Message)
	case errors.Is(err, context.DeadlineExceeded):
		return "probe timed out"
	case errors.As(err, &ae):
		return ae.Message
	default:
		return boundText(err.Error(), "probe failed")
	}
}
