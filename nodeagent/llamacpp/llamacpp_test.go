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

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// llama-server's answers, byte for byte as its HTTP server writes them
// (tools/server: res_ok / res_error with compact JSON).
const (
	healthOK       = `{"status":"ok"}`
	healthLoading  = `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`
	slotsNoSupport = `{"error":{"code":501,"message":"This server does not support slots endpoint. Start it with ` + "`--slots`" + `","type":"not_supported_error"}}`
	chatJSON       = `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Hello there"}}],"created":1733000000,"model":"qwen2.5-0.5b-instruct-q4_k_m.gguf","system_fingerprint":"b4200-3bcd40b3","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11},"id":"chatcmpl-Zq1","timings":{"prompt_n":9,"prompt_ms":12.1,"predicted_n":2,"predicted_ms":20.4}}`
	metricsText    = "# HELP llamacpp:requests_processing Number of requests processing.\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n# HELP llamacpp:requests_deferred Number of requests deferred.\n# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 3\n# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.\n# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio 0.42\n"
)

func slotsJSON(busy ...bool) string {
	parts := make([]string, len(busy))
	for i, b := range busy {
		parts[i] = `{"id":` + string(rune('0'+i)) + `,"id_task":-1,"n_ctx":4096,"speculative":false,"is_processing":` + map[bool]string{true: "true", false: "false"}[b] +
			`,"params":{"n_predict":-1,"seed":4294967295,"temperature":0.800000011920929},"next_token":{"has_next_token":true,"n_remain":-1,"n_decoded":0}}`
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// server imitates llama-server; state is swapped by the test.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	health  int    // status of /health
	slots   string // "" means --no-slots (501)
	metrics bool   // --metrics
	chats   atomic.Int32
}

func newServer(t *testing.T) *server {
	s := &server{health: http.StatusOK, slots: slotsJSON(false, false)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		health, slots, metrics := s.health, s.slots, s.metrics
		s.mu.Unlock()
		w.Header().Set("Server", "llama.cpp")
		switch r.URL.Path {
		case "/health":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(health)
			if health == http.StatusOK {
				_, _ = io.WriteString(w, healthOK)
			} else {
				_, _ = io.WriteString(w, healthLoading)
			}
		case "/slots":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			if slots == "" {
				w.WriteHeader(http.StatusNotImplemented)
				_, _ = io.WriteString(w, slotsNoSupport)
				return
			}
			_, _ = io.WriteString(w, slots)
		case "/metrics":
			if !metrics {
				w.WriteHeader(http.StatusNotImplemented)
				_, _ = io.WriteString(w, `{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `+"`--metrics`"+`","type":"not_supported_error"}}`)
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, metricsText)
		case "/v1/chat/completions":
			s.chats.Add(1)
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"stream":true`) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, ev := range []string{
					`{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1733000000,"id":"chatcmpl-Zq2","model":"qwen2.5-0.5b-instruct-q4_k_m.gguf","system_fingerprint":"b4200-3bcd40b3","object":"chat.completion.chunk"}`,
					`{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}],"created":1733000000,"id":"chatcmpl-Zq2","model":"qwen2.5-0.5b-instruct-q4_k_m.gguf","system_fingerprint":"b4200-3bcd40b3","object":"chat.completion.chunk"}`,
					`{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1733000000,"id":"chatcmpl-Zq2","model":"qwen2.5-0.5b-instruct-q4_k_m.gguf","system_fingerprint":"b4200-3bcd40b3","object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":9,"total_tokens":10}}`,
				} {
					_, _ = io.WriteString(w, "data: "+ev+"\n\n")
					w.(http.Flusher).Flush()
				}
				_, _ = io.WriteString(w, "data: [DONE]\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, chatJSON)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) set(f func(*server)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

func newInstance(t *testing.T, s *server) *Instance {
	t.Helper()
	in, err := New(&iop.AdapterConfig{Name: "llama", Type: TypeName, Capacity: 2, BaseUrl: s.URL + "/v1"}, adapter.Env{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return in.(*Instance)
}

// fresh forgets the cached probe so the next Health asks again.
func (in *Instance) fresh() {
	in.mu.Lock()
	in.at = in.at.AddDate(-1, 0, 0)
	in.mu.Unlock()
}

func TestHealthFromHealthAndSlots(t *testing.T) {
	s := newServer(t)
	in := newInstance(t, s)
	ctx := context.Background()

	s.set(func(s *server) { s.health = http.StatusServiceUnavailable })
	if h := in.Health(ctx); h.Status != adapter.HealthOffline || !strings.Contains(h.Detail, "loading") {
		t.Fatalf("loading: %+v", h)
	}
	in.fresh()
	s.set(func(s *server) { s.health, s.slots = http.StatusOK, slotsJSON(true, false) })
	if h := in.Health(ctx); h.Status != adapter.HealthOK || h.Running != 1 || h.Detail != "1 of 2 slots processing" {
		t.Fatalf("one busy slot: %+v", h)
	}
	in.fresh()
	s.set(func(s *server) { s.slots = slotsJSON(true, true) })
	if h := in.Health(ctx); h.Status != adapter.HealthDegraded || h.Running != 2 {
		t.Fatalf("every slot busy: %+v", h)
	}
	// Without /slots, /metrics (--metrics) gives the load.
	in.fresh()
	s.set(func(s *server) { s.slots, s.metrics = "", true })
	if h := in.Health(ctx); h.Status != adapter.HealthDegraded || h.Running != 2 || h.Waiting != 3 || h.KVCacheUsage != 0.42 {
		t.Fatalf("from /metrics: %+v", h)
	}
	// Neither: ok, load unknown.
	in.fresh()
	s.set(func(s *server) { s.metrics = false })
	if h := in.Health(ctx); h.Status != adapter.HealthOK || h.Running != 0 {
		t.Fatalf("no load endpoint: %+v", h)
	}
	// Down.
	in.fresh()
	s.Close()
	if h := in.Health(ctx); h.Status != adapter.HealthOffline {
		t.Fatalf("closed server: %+v", h)
	}
}

// One probe serves every Health call within a second.
func TestHealthCached(t *testing.T) {
	s := newServer(t)
	in := newInstance(t, s)
	first := in.Health(context.Background())
	s.set(func(s *server) { s.health = http.StatusServiceUnavailable })
	if again := in.Health(context.Background()); again != first {
		t.Fatalf("a second probe within the TTL: %+v then %+v", first, again)
	}
}

type sink struct {
	status int
	header http.Header
	body   strings.Builder
	usage  *iop.Usage
}

func (s *sink) Status(code int, h http.Header) error { s.status, s.header = code, h; return nil }
func (s *sink) Body(p []byte) error                  { s.body.Write(p); return nil }
func (s *sink) Usage(u *iop.Usage) error             { s.usage = u; return nil }
func (s *sink) Metadata(map[string]string) error     { return nil }

// Chat completions tunnel to llama-server's /v1 unchanged, streamed or not.
func TestTunnelChat(t *testing.T) {
	s := newServer(t)
	in := newInstance(t, s)
	var whole sink
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{
		Method: http.MethodPost, Path: "/chat/completions", Body: []byte(`{"model":"q","messages":[{"role":"user","content":"hi"}]}`),
	}, &whole)
	if err != nil || whole.status != 200 || whole.body.String() != chatJSON {
		t.Fatalf("non-streamed: %v %d %q", err, whole.status, whole.body.String())
	}
	var streamed sink
	err = in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{
		Method: http.MethodPost, Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"q","stream":true,"messages":[{"role":"user","content":"hi"}]}`),
	}, &streamed)
	if err != nil || streamed.status != 200 || !strings.HasSuffix(streamed.body.String(), "data: [DONE]\n\n") || !strings.Contains(streamed.body.String(), `"content":"Hello"`) {
		t.Fatalf("streamed: %v %d %q", err, streamed.status, streamed.body.String())
	}
	if streamed.usage.GetCompletionTokens() != 1 || streamed.usage.GetPromptTokens() != 9 {
		t.Fatalf("usage from the stream: %v", streamed.usage)
	}
}

type deltas struct{ strings.Builder }

func (d *deltas) Delta(s string) error { d.WriteString(s); return nil }

// The normalized run path works as for any OpenAI-compatible backend.
func TestRunChat(t *testing.T) {
	s := newServer(t)
	in := newInstance(t, s)
	var d deltas
	res, err := in.Run(context.Background(), &iop.RunRequest{RunId: "r", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Target: "q",
		Input: &iop.RunInput{Messages: []*iop.ChatMessage{{Role: iop.ChatRole_CHAT_ROLE_USER, Content: []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: "hi"}}}}}}}, &d)
	if err != nil || d.String() == "" || res.Usage.GetPromptTokens() != 9 {
		t.Fatalf("run: %v %q %+v", err, d.String(), res)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []*iop.AdapterConfig{
		{Type: TypeName, Capacity: 1},                                 // no base_url
		{Type: TypeName, Capacity: 1, BaseUrl: "ftp://x"},             // not http
		{Type: "vllm", Capacity: 1, BaseUrl: "http://127.0.0.1:1/v1"}, // wrong type
	} {
		if _, err := New(cfg, adapter.Env{}); err == nil {
			t.Errorf("accepted %v", cfg)
		}
	}
	if root, err := rootOf("http://gpu:8080/v1/"); err != nil || root != "http://gpu:8080" {
		t.Fatalf("root %q %v", root, err)
	}
}
