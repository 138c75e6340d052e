package gateway_test

// Shared fixtures for the gateway end-to-end tests: an in-process edge and
// node over loopback TCP (internal/stack), httptest upstreams that answer
// like vLLM byte for byte, and small assertion helpers. Nothing here sleeps
// to assert: waits are channel receives with deadlines or bounded polls of
// dispatcher state (stack.WaitFor).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Names used throughout.
const (
	nodeID      = "gpu-a"
	nodeToken   = "node-token-a"
	target      = "Qwen/Qwen2.5-7B-Instruct"
	embedTarget = "BAAI/bge-m3"
	upstreamKey = "sk-node-local-secret" // what api_key_env resolves to on the node
	keyEnv      = "VLLM_API_KEY"
	waitLong    = 10 * time.Second // generous: 2 cores, race detector, parallel builds
)

// --- vLLM fixtures -------------------------------------------------------
//
// vLLM answers with pydantic models serialized compactly (FastAPI
// JSONResponse / model_dump_json), streams `data: <chunk>\n\n` events, ends
// streams with `data: [DONE]\n\n`, puts the include_usage chunk last with
// `"choices":[]`, and reports errors as ErrorResponse.

const vllmChatJSON = `{"id":"chatcmpl-8f3c2a1b9d7e4f6a","object":"chat.completion","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":"Hello! How can I help you today?","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":20,"total_tokens":30,"completion_tokens":10,"prompt_tokens_details":null},"prompt_logprobs":null}`

const vllmToolCallJSON = `{"id":"chatcmpl-1d2c3b4a5f6e7d8c","object":"chat.completion","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":null,"tool_calls":[{"id":"chatcmpl-tool-3c8f0b4f5a0e4c3c","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}],"usage":{"prompt_tokens":180,"total_tokens":201,"completion_tokens":21,"prompt_tokens_details":null},"prompt_logprobs":null}`

// vllmToolChoiceError is vLLM's answer (HTTP 400) to a request with tools
// when the server runs without --enable-auto-tool-choice (vLLM >= 0.10
// ErrorResponse shape).
const vllmToolChoiceError = `{"error":{"message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}`

const vllmEmbeddingJSON = `{"id":"embd-4b7e0c2f9a1d4e3b","object":"list","created":1727000000,"model":"BAAI/bge-m3","data":[{"index":0,"object":"embedding","embedding":[0.0123,-0.0456,0.0789,-0.1011]},{"index":1,"object":"embedding","embedding":[-0.5,0.25,0.125,0.0625]}],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}}`

// chunk renders one vLLM chat.completion.chunk event whose choice carries
// delta (a JSON object) and finish (a JSON value: null or a quoted reason).
func chunk(delta, finish string) string {
	extra := ""
	if finish != "null" {
		extra = `,"stop_reason":null`
	}
	return `data: {"id":"chatcmpl-5a1f3b2c9e8d4f7a","object":"chat.completion.chunk","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + finish + extra + `}]}` + "\n\n"
}

// usageChunk is the include_usage chunk vLLM sends after the finish chunk.
func usageChunk(prompt, completion int) string {
	b, _ := json.Marshal(map[string]int{"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion})
	return `data: {"id":"chatcmpl-5a1f3b2c9e8d4f7a","object":"chat.completion.chunk","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":` +
		string(b) + `}` + "\n\n"
}

const sseDone = "data: [DONE]\n\n"

// contentStream is a whole vLLM stream answering words, with usage.
func contentStream(words ...string) []string {
	ev := []string{chunk(`{"role":"assistant","content":""}`, "null")}
	for _, w := range words {
		b, _ := json.Marshal(w)
		ev = append(ev, chunk(`{"content":`+string(b)+`}`, "null"))
	}
	ev = append(ev, chunk(`{"content":""}`, `"stop"`), usageChunk(12, len(words)), sseDone)
	return ev
}

// --- upstream ------------------------------------------------------------

// seenRequest is what an upstream received.
type seenRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// upstream is an httptest server imitating vLLM. handle serves the API
// paths; GET /health and /metrics answer like vLLM so health probes pass.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newUpstream(t *testing.T, handle http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
			return
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			_, _ = io.WriteString(w, "vllm:num_requests_running{model_name=\"m\"} 0.0\nvllm:num_requests_waiting{model_name=\"m\"} 0.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.1\n")
			return
		}
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		handle(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// baseURL is the provider base_url (vLLM serves under /v1).
func (u *upstream) baseURL() string { return u.URL + "/v1" }

// writeJSON answers status with a JSON body exactly as given.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// writeSSE starts an event stream the way vLLM's StreamingResponse does.
func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		_, _ = io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

// --- configs and stacks --------------------------------------------------

func vllmProvider(name, baseURL string) config.ProviderSpec {
	return config.ProviderSpec{Name: name, Type: "vllm", BaseURL: baseURL, APIKeyEnv: keyEnv, Capacity: 4}
}

func mockProvider(name string, settings map[string]any) config.ProviderSpec {
	return config.ProviderSpec{Name: name, Type: "mock", Capacity: 4, Extra: settings}
}

func modelOn(name, provider, tgt string) config.ModelSpec {
	return config.ModelSpec{Name: name, Providers: []config.ModelProvider{{Node: nodeID, Provider: provider, Target: tgt}}}
}

func edgeConfig(providers []config.ProviderSpec, models ...config.ModelSpec) *config.Edge {
	return &config.Edge{
		Nodes:  []config.NodeSpec{{ID: nodeID, Token: nodeToken, Providers: providers}},
		Models: models,
	}
}

func nodeEnv(name string) string {
	if name == keyEnv {
		return upstreamKey
	}
	return ""
}

// startEdge starts only the edge (no node connected).
func startEdge(t *testing.T, cfg *config.Edge) *stack.Edge {
	t.Helper()
	return stack.StartEdge(t, cfg, stack.EdgeOptions{})
}

// startEdgeShortGrace is startEdge with a cancel grace of shortGrace: for
// tests whose node never answers a cancel, which would otherwise wait out
// the default grace (5 s) for every lease.
func startEdgeShortGrace(t *testing.T, cfg *config.Edge) *stack.Edge {
	t.Helper()
	return stack.StartEdge(t, cfg, stack.EdgeOptions{CancelGrace: shortGrace})
}

// startNode connects the node and waits until the edge reports it ready.
func startNode(t *testing.T, e *stack.Edge) *stack.Node {
	t.Helper()
	n := stack.StartNode(t, e.NodeAddr, nodeID, stack.NodeOptions{Token: nodeToken, Getenv: nodeEnv})
	e.WaitReady(t, nodeID, waitLong)
	return n
}

// startStack starts an edge for cfg and one ready node.
func startStack(t *testing.T, cfg *config.Edge) (*stack.Edge, *stack.Node) {
	t.Helper()
	e := startEdge(t, cfg)
	return e, startNode(t, e)
}

// --- clients -------------------------------------------------------------

// httpClient is a client with its own transport, closed at cleanup so no
// keep-alive goroutine outlives the test.
func httpClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// oaClient is the real OpenAI Go SDK pointed at the edge.
func oaClient(t *testing.T, e *stack.Edge, key string) *openai.Client {
	t.Helper()
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = e.URL + "/v1"
	cfg.HTTPClient = httpClient(t)
	return openai.NewClientWithConfig(cfg)
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// response is a fully read HTTP answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends a request and reads the whole answer.
func do(t *testing.T, c *http.Client, method, url, body string, hdr map[string]string) response {
	t.Helper()
	r, err := tryDo(ctxT(t), c, method, url, body, hdr)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// tryDo is do for goroutines other than the test's (no t.Fatal).
func tryDo(ctx context.Context, c *http.Client, method, url, body string, hdr map[string]string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return response{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// postAsync posts from a new goroutine; the answer (Status 0 on a transport
// error) arrives on the returned channel.
func postAsync(t *testing.T, e *stack.Edge, path, body string) <-chan response {
	t.Helper()
	c, ctx := httpClient(t), ctxT(t)
	ch := make(chan response, 1)
	go func() {
		r, err := tryDo(ctx, c, http.MethodPost, e.URL+path, body, nil)
		if err != nil {
			r = response{Body: []byte(err.Error())}
		}
		ch <- r
	}()
	return ch
}

func post(t *testing.T, e *stack.Edge, path, body string) response {
	t.Helper()
	return do(t, httpClient(t), http.MethodPost, e.URL+path, body, nil)
}

// readEvents splits an SSE body into its data payloads, in order.
func readEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			out = append(out, strings.TrimPrefix(line, "data: "))
		}
	}
	return out
}

// --- assertions ----------------------------------------------------------

// assertError checks status and the exact OpenAI envelope shape
// {"error":{"message","type","param","code"}} with the given code.
func assertError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	checkEnvelope(t, r.Body, code)
}

func checkEnvelope(t *testing.T, body []byte, code string) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || len(top) != 1 || top["error"] == nil {
		t.Fatalf("not an error envelope: %s", body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &inner); err != nil {
		t.Fatalf("error member is not an object: %s", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := inner[k]; !ok {
			t.Errorf("envelope lacks %q: %s", k, body)
		}
	}
	if len(inner) != 4 {
		t.Errorf("envelope has extra members: %s", body)
	}
	var msg, typ, gotCode string
	_ = json.Unmarshal(inner["message"], &msg)
	_ = json.Unmarshal(inner["type"], &typ)
	_ = json.Unmarshal(inner["code"], &gotCode)
	if msg == "" || typ == "" {
		t.Errorf("empty message or type: %s", body)
	}
	if p := string(inner["param"]); p != "null" && !strings.HasPrefix(p, `"`) {
		t.Errorf("param %s is neither null nor a string", p)
	}
	if gotCode != code {
		t.Errorf("code %q, want %q: %s", gotCode, code, body)
	}
}

// metric returns the value of the counter or gauge name with exactly the
// given labels (0 when absent).
func metric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func cancellations(t *testing.T, e *stack.Edge, reason string) float64 {
	t.Helper()
	return metric(t, e.Registry, "iop_cancellations_total", map[string]string{"reason": reason})
}

// inFlight is the provider's lease count in the dispatcher's snapshot.
func inFlight(e *stack.Edge, provider string) int {
	for _, n := range e.Dispatcher.Status().Nodes {
		for _, p := range n.Providers {
			if p.ProviderId == provider {
				return int(p.InFlight)
			}
		}
	}
	return -1
}

// waitReleased waits until the provider holds no lease.
func waitReleased(t *testing.T, e *stack.Edge, provider string) {
	t.Helper()
	stack.WaitFor(t, waitLong, provider+" in_flight back to 0", func() bool { return inFlight(e, provider) == 0 })
}

// waitFor receives from ch or fails after d.
func waitFor[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	return testwait.Recv(t, ch, d, what)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("JSON differs:\n got %s\nwant %s", got, want)
	}
}

// stackT is a running edge with its node.
type stackT struct {
	*stack.Edge
	Node *stack.Node
}

// postInBackground posts body to url from a goroutine. hangUp cancels
// the request as a client hanging up; done yields its error.
func postInBackground(t *testing.T, url, body string) (hangUp func(), done <-chan error) {
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	c := httpClient(t)
	// Owner: the calling test. Stops when the request returns, at the
	// latest at hangUp or the test's own deadline (ctxT).
	go func() {
		_, err := tryDo(ctx, c, http.MethodPost, url, body, nil)
		errc <- err
	}()
	return cancel, errc
}
