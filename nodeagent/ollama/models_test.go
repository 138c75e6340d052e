package ollama

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestModels(t *testing.T) {
	f := newFake(t)
	f.handle("/api/tags", jsonStatus(200, tagsResponse))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	names, err := inst.Models(context.Background())
	if err != nil {
		t.Fatalf("Models: %v", err)
	}
	if !slices.Equal(names, []string{"deepseek-r1:latest", "llama3.2:latest"}) {
		t.Fatalf("names = %q", names)
	}
	if r := f.request(t); r.method != http.MethodGet || r.path != "/api/tags" {
		t.Fatalf("request %s %s", r.method, r.path)
	}

	f.handle("/api/tags", jsonStatus(500, `{"error":"boom"}`))
	var ae *adapter.Error
	if _, err := inst.Models(context.Background()); !errors.As(err, &ae) || ae.HTTPStatus != 500 {
		t.Fatalf("err = %v", err)
	}
}

func TestHealthOKAndCached(t *testing.T) {
	var hits atomic.Int32
	f := newFake(t)
	f.handle("/api/version", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		jsonStatus(200, `{"version":"0.12.6"}`)(w, r)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	h := inst.Health(context.Background())
	if h.Status != adapter.HealthOK || h.Detail != "ollama 0.12.6" {
		t.Fatalf("health = %+v", h)
	}
	// Within the TTL the cached value is served without a new probe.
	if h2 := inst.Health(context.Background()); h2 != h || hits.Load() != 1 {
		t.Fatalf("second health = %+v after %d probes", h2, hits.Load())
	}
}

func TestHealthFallsBackToRoot(t *testing.T) {
	f := newFake(t)
	f.handle("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Ollama is running")
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if h := inst.Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("health = %+v", h)
	}
}

func TestHealthOffline(t *testing.T) {
	f := newFake(t)
	url := f.URL
	f.Close()
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: url})
	if h := inst.Health(context.Background()); h.Status != adapter.HealthOffline || h.Detail == "" {
		t.Fatalf("health = %+v", h)
	}

	g := newFake(t)
	g.handle("/api/version", jsonStatus(500, `{"error":"busy"}`))
	g.handle("/", jsonStatus(500, `{"error":"busy"}`))
	inst = newInstance(t, &iop.AdapterConfig{BaseUrl: g.URL})
	if h := inst.Health(context.Background()); h.Status != adapter.HealthOffline {
		t.Fatalf("health = %+v", h)
	}
}

func TestReconfigureSwitchesServerAndDropsHealthCache(t *testing.T) {
	a, b := newFake(t), newFake(t)
	a.handle("/api/version", jsonStatus(200, `{"version":"0.1.0"}`))
	b.handle("/api/version", jsonStatus(200, `{"version":"0.2.0"}`))
	b.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: a.URL})
	if h := inst.Health(context.Background()); h.Detail != "ollama 0.1.0" {
		t.Fatalf("health = %+v", h)
	}

	err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: b.URL + "/", Headers: map[string]string{"X-Team": "ml"}, TimeoutSec: 30})
	if err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	if h := inst.Health(context.Background()); h.Detail != "ollama 0.2.0" {
		t.Fatalf("health after reconfigure = %+v (stale cache?)", h)
	}
	b.request(t) // the health probe
	if _, _, err := runChat(t, inst, simpleChat); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := b.request(t); r.header.Get("X-Team") != "ml" || r.path != "/api/chat" {
		t.Fatalf("request %s headers %v", r.path, r.header)
	}

	// An invalid config is rejected and the live one stays.
	if err := inst.Reconfigure(&iop.AdapterConfig{BaseUrl: "ftp://x", TimeoutSec: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := runChat(t, inst, simpleChat); err != nil {
		t.Fatalf("Run after rejected reconfigure: %v", err)
	}
}
