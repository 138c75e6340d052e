package openaicompat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fakeRunSink records the deltas of one run.
type fakeRunSink struct {
	mu     sync.Mutex
	deltas []string
	ch     chan string // optional: every delta is also sent here
	err    error       // returned by Delta when set
}

func (s *fakeRunSink) Delta(text string) error {
	s.mu.Lock()
	s.deltas = append(s.deltas, text)
	err := s.err
	s.mu.Unlock()
	if s.ch != nil {
		s.ch <- text
	}
	return err
}

func (s *fakeRunSink) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.deltas, "")
}

// fakeTunnelSink records what a tunnel relays, in order.
type fakeTunnelSink struct {
	mu       sync.Mutex
	calls    []string // "status", "body", "usage", "metadata"
	status   int
	header   http.Header
	chunks   [][]byte
	usages   []*iop.Usage
	metadata []map[string]string
	bodyCh   chan []byte // optional: every body chunk is also sent here
}

func (s *fakeTunnelSink) Status(code int, h http.Header) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "status")
	s.status, s.header = code, h
	return nil
}

func (s *fakeTunnelSink) Body(p []byte) error {
	cp := bytes.Clone(p)
	s.mu.Lock()
	s.calls = append(s.calls, "body")
	s.chunks = append(s.chunks, cp)
	s.mu.Unlock()
	if s.bodyCh != nil {
		s.bodyCh <- cp
	}
	return nil
}

func (s *fakeTunnelSink) Usage(u *iop.Usage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "usage")
	s.usages = append(s.usages, u)
	return nil
}

func (s *fakeTunnelSink) Metadata(m map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "metadata")
	s.metadata = append(s.metadata, m)
	return nil
}

func (s *fakeTunnelSink) body() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.chunks, nil)
}

// newTestInstance builds an instance against srv with a node-local key.
func newTestInstance(t testing.TB, kind string, cfg *iop.AdapterConfig) *Instance {
	t.Helper()
	env := adapter.Env{Getenv: func(k string) string {
		if k == "TEST_PROVIDER_KEY" {
			return "sk-node-local"
		}
		return ""
	}}
	cfg.Type = kind
	factory := New
	if kind == TypeVLLM {
		factory = NewVLLM
	}
	inst, err := factory(cfg, env)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	switch v := inst.(type) {
	case *Instance:
		return v
	case VLLMInstance:
		return v.Instance
	}
	t.Fatalf("unexpected instance type %T", inst)
	return nil
}

func testConfig(baseURL string) *iop.AdapterConfig {
	return &iop.AdapterConfig{
		Name:      "test-provider",
		Type:      TypeOpenAICompat,
		BaseUrl:   baseURL + "/v1",
		ApiKeyEnv: "TEST_PROVIDER_KEY",
	}
}

// sseWrite writes raw bytes and flushes, as vLLM's StreamingResponse does
// per yielded chunk.
func sseWrite(t *testing.T, w http.ResponseWriter, s string) {
	t.Helper()
	if _, err := w.Write([]byte(s)); err != nil {
		return // the client went away; the handler notices via its context
	}
	w.(http.Flusher).Flush()
}

func sseHeaders(w http.ResponseWriter) {
	// What vLLM's StreamingResponse(media_type="text/event-stream") sends.
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// vllmChunk renders one chat.completion.chunk the way vLLM serializes it
// (model_dump_json(exclude_unset=True); "usage":null because include_usage
// was requested).
func vllmChunk(delta string, finish string) string {
	fin := "null"
	extra := ""
	if finish != "" {
		fin = `"` + finish + `"`
		extra = `,"stop_reason":null`
	}
	return `data: {"id":"chatcmpl-5a1f3b2c9e8d4f7a","object":"chat.completion.chunk","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + fin + extra + `}],"usage":null}` + "\n\n"
}

// vllmUsageChunk is the final include_usage chunk (exclude_none: no
// logprobs, empty choices).
func vllmUsageChunk(prompt, completion int) string {
	return fmt.Sprintf(`data: {"id":"chatcmpl-5a1f3b2c9e8d4f7a","object":"chat.completion.chunk","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n",
		prompt, prompt+completion, completion)
}

const vllmDone = "data: [DONE]\n\n"

// vllmToolChoiceError is vLLM's answer to tools with tool_choice "auto" when
// started without --enable-auto-tool-choice (ErrorResponse before 0.10).
const vllmToolChoiceError = `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`

// vllmToolChoiceErrorV2 is the same refusal in the nested shape newer vLLM
// versions use.
const vllmToolChoiceErrorV2 = `{"error":{"message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}`

// recorder is an upstream that captures request bodies.
type recorder struct {
	mu     sync.Mutex
	bodies []map[string]any
	paths  []string
	auth   []string
}

func (r *recorder) record(t *testing.T, req *http.Request) map[string]any {
	t.Helper()
	var body map[string]any
	if req.Body != nil {
		_ = json.NewDecoder(req.Body).Decode(&body)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, body)
	r.paths = append(r.paths, req.URL.RequestURI())
	r.auth = append(r.auth, req.Header.Get("Authorization"))
	return body
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func (r *recorder) body(i int) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[i]
}

func newServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// jsonEqual compares two JSON documents structurally.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs:\n got: %s\nwant: %s", got, want)
	}
}

func asAdapterError(t *testing.T, err error) *adapter.Error {
	t.Helper()
	var ae *adapter.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *adapter.Error", err, err)
	}
	return ae
}
