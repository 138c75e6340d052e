package ollama

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Lines as Ollama's server writes them (json.Marshal of api.ChatResponse /
// api.GenerateResponse plus "\n"), taken from its API documentation.
const (
	chatLineThe   = `{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":"The"},"done":false}`
	chatLineSky   = `{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":" sky"},"done":false}`
	chatLineFinal = `{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":26,"prompt_eval_duration":342546000,"eval_count":282,"eval_duration":4535599000}`
	// The streamed tool call of ollama.com/blog/streaming-tool (qwen3).
	chatLineToolCall = `{"model":"qwen3","created_at":"2025-05-27T22:54:58.100509Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_current_weather","arguments":{"format":"celsius","location":"Toronto"}}}]},"done":false}`
	chatLineToolDone = `{"model":"qwen3","created_at":"2025-05-27T22:54:58.219134Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":885095291,"load_duration":3753500,"prompt_eval_count":122,"prompt_eval_duration":328493000,"eval_count":33,"eval_duration":552222000}`
	// Mid-stream failure, from Ollama's docs/api/errors.
	lineError = `{"error":"an error was encountered while running the model"}`

	genLineThat  = `{"model":"gemma3","created_at":"2025-10-26T17:15:24.097767Z","response":"That","done":false}`
	genLineQ     = `{"model":"gemma3","created_at":"2025-10-26T17:15:24.155176Z","response":" question","done":false}`
	genLineFinal = `{"model":"gemma3","created_at":"2025-10-26T17:15:24.166576Z","response":"!","done":true,"done_reason":"length","context":[1,2,3],"total_duration":10706818083,"load_duration":6338219291,"prompt_eval_count":26,"prompt_eval_duration":130079000,"eval_count":259,"eval_duration":4232710000}`

	embedResponse = `{"model":"all-minilm","embeddings":[[0.010071029,-0.0017594862,0.05007221,0.04692972,0.054916814],[-0.0098373564,0.060185923,0.025680551,0.012934358,-0.017373271]],"total_duration":14143917,"load_duration":1019500,"prompt_eval_count":8}`

	tagsResponse = `{"models":[{"name":"deepseek-r1:latest","model":"deepseek-r1:latest","modified_at":"2025-05-10T08:06:48.639712648-07:00","size":4683075271,"digest":"0a8c266910232fd3291e71e5ba1e058cc5af9d411192cf88b6d30e92b6e73163","details":{"parent_model":"","format":"gguf","family":"qwen2","families":["qwen2"],"parameter_size":"7.6B","quantization_level":"Q4_K_M"}},{"name":"llama3.2:latest","model":"llama3.2:latest","modified_at":"2025-05-04T17:37:44.706015396-07:00","size":2019393189,"digest":"a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72","details":{"parent_model":"","format":"gguf","family":"llama","families":["llama"],"parameter_size":"3.2B","quantization_level":"Q4_K_M"}}]}`
)

// captured is one request the fake server saw.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// fakeOllama is an httptest server whose per-path handlers tests set.
type fakeOllama struct {
	*httptest.Server
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	reqs     chan captured
}

func newFake(t *testing.T) *fakeOllama {
	t.Helper()
	f := &fakeOllama{handlers: map[string]http.HandlerFunc{}, reqs: make(chan captured, 64)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.reqs <- captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}
		r.Body = io.NopCloser(bytes.NewReader(body)) // for handlers that answer by the request
		f.mu.Lock()
		h := f.handlers[r.URL.Path]
		f.mu.Unlock()
		if h == nil {
			// Ollama's router answers unknown paths with a plain 404.
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOllama) handle(path string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[path] = h
}

// lastRequest returns the next captured request or fails after 5s.
func (f *fakeOllama) request(t *testing.T) captured {
	t.Helper()
	select {
	case c := <-f.reqs:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the fake server")
		return captured{}
	}
}

// ndjson answers with the given lines, flushing after each, as Ollama does.
func ndjson(lines ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		for _, l := range lines {
			_, _ = io.WriteString(w, l+"\n")
			w.(http.Flusher).Flush()
		}
	}
}

// jsonStatus answers like gin's c.JSON(status, ...).
func jsonStatus(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func newInstance(t testing.TB, cfg *iop.AdapterConfig) *Instance {
	t.Helper()
	if cfg.Type == "" {
		cfg.Type = TypeName
	}
	inst, err := New(cfg, adapter.Env{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	return inst.(*Instance)
}

// recSink records deltas and signals the first one.
type recSink struct {
	mu     sync.Mutex
	deltas []string
	first  chan struct{}
	once   sync.Once
	err    error
}

func newSink() *recSink { return &recSink{first: make(chan struct{})} }

func (s *recSink) Delta(text string) error {
	s.mu.Lock()
	s.deltas = append(s.deltas, text)
	s.mu.Unlock()
	s.once.Do(func() { close(s.first) })
	return s.err
}

func (s *recSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deltas...)
}

// decodeBody unmarshals a captured request body into a generic map.
func decodeBody(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("request body %q: %v", b, err)
	}
	return m
}

// asJSON re-encodes v so structural comparisons ignore Go types.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantJSON asserts got equals the JSON document want, structurally.
func wantJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	if g, ws := asJSON(t, got), asJSON(t, w); g != ws {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, ws)
	}
}
