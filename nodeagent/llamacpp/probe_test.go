package llamacpp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// slowServer imitates llama-server whose /health answers only when release
// is closed (a loaded machine, a server busy loading), counting the calls.
type slowServer struct {
	*httptest.Server
	release chan struct{}
	health  atomic.Int32
}

func newSlowServer(t *testing.T) *slowServer {
	s := &slowServer{release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "llama.cpp")
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch r.URL.Path {
		case "/health":
			s.health.Add(1)
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, healthOK)
		case "/slots":
			_, _ = io.WriteString(w, slotsJSON(true, false))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.Close()
	})
	return s
}

func instanceAt(t *testing.T, url string, cfg *iop.AdapterConfig, env adapter.Env) *Instance {
	t.Helper()
	if cfg == nil {
		cfg = &iop.AdapterConfig{}
	}
	cfg.Name, cfg.Type, cfg.Capacity, cfg.BaseUrl = "llama", TypeName, 2, url+"/v1"
	in, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return in.(*Instance)
}

// Callers that ask at once while the health is stale share one probe: the
// upstream sees one /health, not one per caller in turn.
func TestConcurrentHealthCallersShareOneProbe(t *testing.T) {
	s := newSlowServer(t)
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	const callers = 8
	var wg sync.WaitGroup
	results := make(chan adapter.Health, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- in.Health(context.Background())
		}()
	}
	// Let every caller reach the probe before the server answers.
	deadline := time.Now().Add(5 * time.Second)
	for s.health.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	close(s.release)
	wg.Wait()
	close(results)
	for h := range results {
		if h.Status != adapter.HealthOK || h.Running != 1 {
			t.Errorf("a caller got %+v, want ok with 1 slot busy", h)
		}
	}
	if n := s.health.Load(); n != 1 {
		t.Fatalf("%d callers made %d /health probes, want 1", callers, n)
	}
}

// A caller whose deadline is shorter than llama-server's answer (the load
// reporter's is its interval, as short as 200 ms) learns nothing either
// way: it must not get, nor leave for the next caller, "offline" for a
// server that is up and answering.
func TestCallerDeadlineIsNotOffline(t *testing.T) {
	s := newSlowServer(t)
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if h := in.Health(ctx); h.Status == adapter.HealthOffline {
		t.Fatalf("caller's deadline reported as the server's state: %+v", h)
	}
	close(s.release)
	if h := in.Health(context.Background()); h.Status != adapter.HealthOK || h.Running != 1 {
		t.Fatalf("after the server answered: %+v, want ok with 1 slot busy", h)
	}
}

// llama-server started with --api-key answers /slots and /metrics only to
// the key (/health is public); the probes carry api_key_env's key and the
// configured headers, as every other request to the provider does.
func TestProbesCarryAPIKeyAndHeaders(t *testing.T) {
	const key = "sk-llama-test"
	var sawHeader atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "llama.cpp")
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if r.URL.Path != "/health" && r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`)
			return
		}
		if r.URL.Path == "/slots" && r.Header.Get("X-Tenant") == "blue" {
			sawHeader.Store(true)
		}
		switch r.URL.Path {
		case "/health":
			_, _ = io.WriteString(w, healthOK)
		case "/slots":
			_, _ = io.WriteString(w, slotsJSON(true, false, false))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
		}
	}))
	defer srv.Close()
	env := adapter.Env{Getenv: func(name string) string {
		if name == "LLAMA_KEY" {
			return key
		}
		return ""
	}}
	in := instanceAt(t, srv.URL, &iop.AdapterConfig{ApiKeyEnv: "LLAMA_KEY", Headers: map[string]string{"x-tenant": "blue"}}, env)
	h := in.Health(context.Background())
	if h.Status != adapter.HealthOK || h.Running != 1 || h.Detail != "1 of 3 slots processing" {
		t.Fatalf("health behind --api-key: %+v, want 1 of 3 slots processing", h)
	}
	if !sawHeader.Load() {
		t.Fatal("configured header not sent with the probe")
	}
}

// Close releases the probes' kept-alive connections: a retired or replaced
// instance leaves no connection (and its transport goroutines) behind.
func TestCloseReleasesProbeConnections(t *testing.T) {
	s := newServer(t)
	in, err := New(&iop.AdapterConfig{Name: "llama", Type: TypeName, Capacity: 2, BaseUrl: s.URL + "/v1"}, adapter.Env{})
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	if h := in.(*Instance).Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("health: %+v", h)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}

// A probe answer's headers are bounded as any provider answer's are
// (256 KiB): past that the probe fails, it is not read into memory.
func TestProbeHeadersBounded(t *testing.T) {
	pad := strings.Repeat("a", 8<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 64 { // 512 KiB of headers
			w.Header().Set("X-Pad-"+string(rune('A'+i%26))+string(rune('A'+i/26)), pad)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, healthOK)
	}))
	defer srv.Close()
	in := instanceAt(t, srv.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOffline {
		t.Fatalf("a /health answer with 512 KiB of headers was read: %+v", h)
	}
}
