package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// tunnelStack starts a vllm provider "vllm-main" serving model qwen-7b (and
// bge for embeddings) on the given upstream.
func tunnelStack(t *testing.T, u *upstream, mut ...func(*config.Edge)) *stackT {
	t.Helper()
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL())},
		modelOn("qwen-7b", "vllm-main", target), modelOn("bge", "vllm-main", embedTarget))
	for _, m := range mut {
		m(cfg)
	}
	e, n := startStack(t, cfg)
	return &stackT{Edge: e, Node: n}
}

// The non-streamed answer is the upstream's bytes; the upstream sees the
// request with only "model" rewritten, the node's own key instead of the
// client's, and only the allow-listed headers (no custom, credential,
// forwarding or hop-by-hop header).
func TestTunnelChatNonStreamBytes(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream-Trace", "trace-1")
		w.Header().Set("Connection", "X-Upstream-Hop")
		w.Header().Set("X-Upstream-Hop", "must-not-cross")
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	s := tunnelStack(t, u)

	// Odd spacing, key order and number spellings must survive untouched.
	reqBody := `{ "messages": [{"role":"user", "content":"Hi \u00e9 there"}],` + "\n" +
		`  "model" :  "qwen-7b", "temperature": 0.20, "max_tokens": 1e2, "metadata": {"model": "keep-me"} }`
	r := do(t, httpClient(t), http.MethodPost, s.URL+"/v1/chat/completions", reqBody, map[string]string{
		"Authorization":       "Bearer client-key-must-not-leak",
		"X-Custom-Pass":       "yes",
		"Connection":          "X-Client-Hop",
		"X-Client-Hop":        "1",
		"Keep-Alive":          "timeout=5",
		"Proxy-Authorization": "Basic Zm9vOmJhcg==",
		"X-Request-Id":        "req-tunnel-1",
		"X-IOP-Session-Id":    "sess-7",
		"Cookie":              "session=secret",
	})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if string(r.Body) != vllmChatJSON {
		t.Errorf("body differs from upstream's:\n got %s\nwant %s", r.Body, vllmChatJSON)
	}
	if got := r.Header.Get("X-Upstream-Trace"); got != "trace-1" {
		t.Errorf("X-Upstream-Trace %q, want trace-1", got)
	}
	if got := r.Header.Get("X-Upstream-Hop"); got != "" {
		t.Errorf("hop-by-hop response header X-Upstream-Hop crossed the edge: %q", got)
	}
	if got := r.Header.Get("X-Request-Id"); got != "req-tunnel-1" {
		t.Errorf("X-Request-Id %q, want req-tunnel-1", got)
	}

	seen := u.requests()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(seen))
	}
	up := seen[0]
	if up.Method != http.MethodPost || up.Path != "/v1/chat/completions" {
		t.Errorf("upstream got %s %s", up.Method, up.Path)
	}
	want := strings.Replace(reqBody, `"model" :  "qwen-7b"`, `"model" :  "`+target+`"`, 1)
	if string(up.Body) != want {
		t.Errorf("upstream body:\n got %s\nwant %s", up.Body, want)
	}
	if got := up.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		t.Errorf("upstream Authorization %q, want the node-local key", got)
	}
	for _, h := range []string{"X-Custom-Pass", "X-Client-Hop", "Keep-Alive", "Proxy-Authorization", "X-Iop-Session-Id", "Cookie"} {
		if v := up.Header.Get(h); v != "" {
			t.Errorf("hop-by-hop header %s reached the upstream: %q", h, v)
		}
	}
	if c := up.Header.Get("Connection"); strings.Contains(strings.ToLower(c), "x-client-hop") {
		t.Errorf("client Connection header reached the upstream: %q", c)
	}
	waitReleased(t, s.Edge, "vllm-main")
}

// Streaming through the OpenAI SDK with include_usage: content and the
// usage chunk arrive, and the relayed events are the upstream's bytes.
func TestTunnelChatStreamWithUsage(t *testing.T) {
	events := contentStream("Hello", ",", " world", "!")
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeSSE(w, events...) })
	s := tunnelStack(t, u)

	st, err := oaClient(t, s.Edge, "any").CreateChatCompletionStream(ctxT(t), openai.ChatCompletionRequest{
		Model:         "qwen-7b",
		Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Say hello"}},
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := readSDKStream(t, st)
	if got.content != "Hello, world!" {
		t.Errorf("content %q", got.content)
	}
	if got.finish != openai.FinishReasonStop {
		t.Errorf("finish_reason %q", got.finish)
	}
	if usage := got.usage; usage == nil || usage.PromptTokens != 12 || usage.CompletionTokens != 4 || usage.TotalTokens != 16 {
		t.Errorf("usage %+v", usage)
	}
	up := u.requests()[0]
	if !bytes.Contains(up.Body, []byte(`"stream_options":{"include_usage":true}`)) || !bytes.Contains(up.Body, []byte(`"model":"`+target+`"`)) {
		t.Errorf("upstream body %s", up.Body)
	}

	// Raw: the edge's body is the upstream's event stream byte for byte. (A
	// client reading to the end, unlike the SDK that closes after [DONE],
	// never races the usage frame: count the tokens around this one.)
	waitReleased(t, s.Edge, "vllm-main")
	tokens := func() float64 {
		return metric(t, s.Registry, "iop_tokens_total", map[string]string{"model": "qwen-7b", "kind": "prompt"})
	}
	before := tokens()
	r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("status %d, Content-Type %q", r.Status, r.Header.Get("Content-Type"))
	}
	if string(r.Body) != strings.Join(events, "") {
		t.Errorf("stream bytes differ:\n got %q\nwant %q", r.Body, strings.Join(events, ""))
	}
	if r.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("X-Accel-Buffering %q, want no (proxies must not buffer SSE)", r.Header.Get("X-Accel-Buffering"))
	}
	waitReleased(t, s.Edge, "vllm-main")
	if got := tokens() - before; got != 12 {
		t.Errorf("iop_tokens_total{prompt} grew by %v, want 12", got)
	}
}

// An event is flushed to the client the moment the upstream sends it: the
// client holds the first event while the upstream is still blocked.
func TestTunnelFlushesEachEvent(t *testing.T) {
	release := make(chan struct{})
	events := contentStream("first", " second")
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, events[0])
		select { // the "pause": until the test saw the first event
		case <-release:
		case <-r.Context().Done():
			return
		}
		for _, e := range events[1:] {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	})
	s := tunnelStack(t, u)

	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		ev, _ := readEvent(br)
		first <- ev
	}()
	got := waitFor(t, first, waitLong, "the first event while the upstream pauses")
	close(release)
	if got != events[0] {
		t.Errorf("first event %q, want %q", got, events[0])
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != strings.Join(events[1:], "") {
		t.Errorf("rest %q", rest)
	}
}

// readEvent reads one SSE event including its blank-line terminator.
func readEvent(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return b.String(), nil
		}
	}
}

// tool_mode native: a request with tools tunnels (the body reaches the
// upstream verbatim) and the upstream's tool_calls reach the SDK.
func TestTunnelNativeTools(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmToolCallJSON) })
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })

	resp, err := oaClient(t, s.Edge, "k").CreateChatCompletion(ctxT(t), openai.ChatCompletionRequest{
		Model:    "qwen-7b",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Weather in Paris?"}},
		Tools:    []openai.Tool{weatherTool()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || len(resp.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("choices %+v", resp.Choices)
	}
	tc := resp.Choices[0].Message.ToolCalls[0]
	if tc.ID != "chatcmpl-tool-3c8f0b4f5a0e4c3c" || tc.Type != openai.ToolTypeFunction || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city": "Paris"}` {
		t.Errorf("tool call %+v", tc)
	}
	if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls {
		t.Errorf("finish_reason %q", resp.Choices[0].FinishReason)
	}
	seen := u.requests()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	// Tunnelled, not run: the run path would force "stream":true.
	if !bytes.Contains(seen[0].Body, []byte(`"tools":[{"function":{"name":"get_weather"`)) || bytes.Contains(seen[0].Body, []byte(`"stream":true`)) {
		t.Errorf("upstream body %s", seen[0].Body)
	}
	stack.WaitFor(t, waitLong, "iop_requests_total{route=tunnel,code=200} = 1", func() bool {
		return metric(t, s.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "200"}) == 1
	})
	waitReleased(t, s.Edge, "vllm-main")
}

func weatherTool() openai.Tool {
	return openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name:        "get_weather",
		Description: "Current weather for a city",
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}
}

// Upstream errors on the tunnel path keep their status; a body already in
// the OpenAI envelope passes untouched, any other is wrapped in it (the
// upstream's message kept) so that every SDK decodes a typed API error.
func TestTunnelUpstreamErrorNormalized(t *testing.T) {
	cases := []struct {
		name, ctype, body string
		status            int
		want              string // "" : the body unchanged
		code, msg         string
	}{
		{name: "openai envelope", ctype: "application/json", status: http.StatusBadRequest,
			body: `{"error":{"message":"Invalid 'messages': empty array.","type":"invalid_request_error","param":"messages","code":"empty_array"}}`},
		{name: "vllm 400 numeric code", ctype: "application/json", status: http.StatusBadRequest,
			body: `{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens. Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`,
			code: "invalid_request", msg: "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens. Please reduce the length of the messages or completion."},
		{name: "old vllm", ctype: "application/json", status: http.StatusNotFound,
			body: `{"object":"error","message":"The model ` + "`" + `nope` + "`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`,
			code: "invalid_request", msg: "The model `nope` does not exist."},
		{name: "plain 503", ctype: "text/plain; charset=utf-8", body: "upstream overloaded\n", status: http.StatusServiceUnavailable,
			code: "upstream_error", msg: "upstream overloaded"},
		{name: "500 empty", ctype: "application/json", body: ``, status: http.StatusInternalServerError,
			code: "upstream_error", msg: "The provider answered HTTP 500."},
	}
	var cur atomic.Int32
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c := cases[cur.Load()]
		w.Header().Set("Content-Type", c.ctype)
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, c.body)
	})
	s := tunnelStack(t, u)
	for i, c := range cases {
		cur.Store(int32(i)) // requests are sequential
		r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"x"}]}`)
		if c.code == "" {
			if r.Status != c.status || string(r.Body) != c.body || r.Header.Get("Content-Type") != c.ctype {
				t.Errorf("%s: got %d %q %q, want it unchanged", c.name, r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			continue
		}
		assertError(t, r, c.status, c.code)
		var env struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &env)
		if env.Error.Message != c.msg {
			t.Errorf("%s: message %q, want %q", c.name, env.Error.Message, c.msg)
		}
		if cl := r.Header.Get("Content-Length"); cl != strconv.Itoa(len(r.Body)) {
			t.Errorf("%s: Content-Length %q for %d bytes", c.name, cl, len(r.Body))
		}
	}
	waitReleased(t, s.Edge, "vllm-main")
}

// Embeddings tunnel to the OpenAI-compatible provider.
func TestTunnelEmbeddings(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, vllmEmbeddingJSON)
	})
	s := tunnelStack(t, u)

	resp, err := oaClient(t, s.Edge, "k").CreateEmbeddings(ctxT(t), openai.EmbeddingRequestStrings{
		Input: []string{"hello world", "bonjour"}, Model: "bge",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Data[1].Embedding[0] != -0.5 || resp.Data[0].Embedding[3] != -0.1011 {
		t.Errorf("data %+v", resp.Data)
	}
	if resp.Usage.PromptTokens != 7 {
		t.Errorf("usage %+v", resp.Usage)
	}
	up := u.requests()[0]
	if !bytes.Contains(up.Body, []byte(`"model":"`+embedTarget+`"`)) {
		t.Errorf("upstream body %s", up.Body)
	}
	r := post(t, s.Edge, "/v1/embeddings", `{"input":"hi","model":"bge","encoding_format":"float"}`)
	if r.Status != http.StatusOK || string(r.Body) != vllmEmbeddingJSON {
		t.Errorf("raw embeddings: %d %s", r.Status, r.Body)
	}
	if got := string(u.requests()[1].Body); got != `{"input":"hi","model":"`+embedTarget+`","encoding_format":"float"}` {
		t.Errorf("upstream body %s", got)
	}

	// A body far larger than any buffer on the way still arrives whole.
	big := bigEmbeddingJSON(16, 2048)
	u2 := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, big) })
	s2 := tunnelStack(t, u2)
	r = post(t, s2.Edge, "/v1/embeddings", `{"input":["a","b"],"model":"bge"}`)
	if r.Status != http.StatusOK || string(r.Body) != big {
		t.Errorf("large embeddings body: %d, %d bytes (want %d)", r.Status, len(r.Body), len(big))
	}
	waitReleased(t, s2.Edge, "vllm-main")
	if got := metric(t, s2.Registry, "iop_tokens_total", map[string]string{"model": "bge", "kind": "prompt"}); got != 7 {
		t.Errorf("usage of the large body: %v prompt tokens, want 7", got)
	}
}

// bigEmbeddingJSON is a vLLM embeddings answer with n vectors of dim floats.
func bigEmbeddingJSON(n, dim int) string {
	var b strings.Builder
	b.WriteString(`{"id":"embd-big","object":"list","created":1727000000,"model":"BAAI/bge-m3","data":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"index":` + strconv.Itoa(i) + `,"object":"embedding","embedding":[`)
		for j := 0; j < dim; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.FormatFloat(float64(i*dim+j)/1e6-0.5, 'g', -1, 64))
		}
		b.WriteString("]}")
	}
	b.WriteString(`],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}}`)
	return b.String()
}

// A member that differs only in case from one the edge reads ("Max_Tokens"
// beside max_tokens, a message's "Content"), or one it reads given twice,
// is refused before routing: a provider whose JSON parser folds case (Go's
// encoding/json) or keeps the first copy would read it instead of what the
// edge validated and estimated. Nothing reaches the provider, no lease
// stays taken, and the body without it passes.
func TestTunnelRefusesCaseVariants(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	for _, tc := range []struct{ body, param string }{
		{`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"Max_Tokens":100000}`, "Max_Tokens"},
		{`{"model":"qwen-7b","messages":[{"role":"user","content":"hi","Content":"unestimated"}]}`, "messages[0].Content"},
		{`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}],"\u017ftream":true}`, "\u017ftream"},
		{`{"model":"qwen-7b","messages":[{"role":"user","content":"unestimated","content":"hi"}]}`, "messages[0].content"},
	} {
		r := post(t, s.Edge, "/v1/chat/completions", tc.body)
		assertError(t, r, http.StatusBadRequest, "invalid_request")
		var env struct {
			Error struct{ Param string } `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || env.Error.Param != tc.param {
			t.Errorf("%s: param %q, want %q", tc.body, env.Error.Param, tc.param)
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Fatalf("%d requests reached the provider", n)
	}
	if r := post(t, s.Edge, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`); r.Status != http.StatusOK {
		t.Fatalf("without the variant: %d %s", r.Status, r.Body)
	}
	waitReleased(t, s.Edge, "vllm-main")
}
