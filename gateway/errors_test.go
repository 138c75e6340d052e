package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// CONTRACT §5 error table, request-validation rows: status, envelope and
// code, with a mock model behind so nothing but validation can fail.
func TestErrorsValidation(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m"))
	cfg.Auth.APIKeys = []string{"sk-good", "sk-other"}
	cfg.Limits.MaxBodyBytes = 1024
	e, _ := startStack(t, cfg)
	c := httpClient(t)
	auth := map[string]string{"Authorization": "Bearer sk-good"}
	url := e.URL + "/v1/chat/completions"

	cases := []struct {
		name   string
		path   string
		body   string
		hdr    map[string]string
		status int
		code   string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model":"demo","messages":[`, auth, 400, "invalid_request"},
		{"not an object", "/v1/chat/completions", `["demo"]`, auth, 400, "invalid_request"},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, auth, 400, "invalid_request"},
		{"missing messages", "/v1/chat/completions", `{"model":"demo"}`, auth, 400, "invalid_request"},
		{"messages wrong type", "/v1/chat/completions", `{"model":"demo","messages":"hi"}`, auth, 400, "invalid_request"},
		{"model wrong type", "/v1/chat/completions", `{"model":7,"messages":[{"role":"user","content":"hi"}]}`, auth, 400, "invalid_request"},
		{"embeddings without input", "/v1/embeddings", `{"model":"demo"}`, auth, 400, "invalid_request"},
		{"no API key", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, nil, 401, "invalid_api_key"},
		{"wrong API key", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer sk-bad"}, 401, "invalid_api_key"},
		{"not bearer", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Basic sk-good"}, 401, "invalid_api_key"},
		{"models need the key", "/v1/models", "", nil, 401, "invalid_api_key"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, auth, 404, "model_not_found"},
		{"unknown model, embeddings", "/v1/embeddings", `{"model":"gpt-9","input":"x"}`, auth, 404, "model_not_found"},
		{"body over the limit", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"` + strings.Repeat("a", 2048) + `"}]}`, auth, 413, "request_too_large"},
	}
	for _, tc := range cases {
		method := http.MethodPost
		if tc.body == "" {
			method = http.MethodGet
		}
		r := do(t, c, method, e.URL+tc.path, tc.body, tc.hdr)
		t.Run(tc.name, func(t *testing.T) { assertError(t, r, tc.status, tc.code) })
	}

	// A chunked body (no Content-Length) over the limit is caught while
	// reading.
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url,
		io.MultiReader(strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"`), strings.NewReader(strings.Repeat("b", 4096)), strings.NewReader(`"}]}`)))
	req.Header.Set("Authorization", "Bearer sk-other")
	req.ContentLength = -1
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assertError(t, response{Status: resp.StatusCode, Header: resp.Header, Body: b}, 413, "request_too_large")

	// The second key works too; the 401 never echoes what was sent.
	r := do(t, c, http.MethodPost, url, `{"model":"demo","messages":[{"role":"user","content":"ok"}]}`, map[string]string{"Authorization": "Bearer sk-other"})
	if r.Status != http.StatusOK {
		t.Errorf("valid key: %d %s", r.Status, r.Body)
	}
	bad := do(t, c, http.MethodPost, url, `{}`, map[string]string{"Authorization": "Bearer sk-secret-guess"})
	if strings.Contains(string(bad.Body), "sk-secret-guess") {
		t.Errorf("401 echoes the key: %s", bad.Body)
	}
}

// Queue full: capacity 1 held at the upstream, one request queued, the
// third gets 429 queue_full with Retry-After; the held ones then finish.
func TestErrorQueueFull(t *testing.T) {
	arrived := make(chan struct{}, 4)
	release := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	p := vllmProvider("vllm-main", u.baseURL())
	p.Capacity = 1
	m := modelOn("qwen-7b", "vllm-main", target)
	m.MaxQueue = 1
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{p}, m))
	body := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`

	first := postAsync(t, e, "/v1/chat/completions", body)
	waitFor(t, arrived, waitLong, "the first request at the upstream")
	second := postAsync(t, e, "/v1/chat/completions", body)
	stack.WaitFor(t, waitLong, "one request queued", func() bool {
		return e.Dispatcher.Status().Models[0].Pending == 1
	})

	r := post(t, e, "/v1/chat/completions", body)
	assertError(t, r, http.StatusTooManyRequests, "queue_full")
	if ra := r.Header.Get("Retry-After"); ra == "" || strings.Trim(ra, "0123456789") != "" {
		t.Errorf("Retry-After %q, want a number of seconds", ra)
	}
	close(release)
	if got := waitFor(t, first, waitLong, "the held request to finish"); got.Status != http.StatusOK || string(got.Body) != vllmChatJSON {
		t.Errorf("held request: %d %s", got.Status, got.Body)
	}
	// The queued one is handed the freed slot: the node frees its own gate
	// slot before the terminal frame that returns the lease, so it is never
	// refused "at capacity".
	if got := waitFor(t, second, waitLong, "the queued request to finish"); got.Status != http.StatusOK {
		t.Errorf("queued request: %d %s", got.Status, got.Body)
	}
	waitReleased(t, e, "vllm-main")
}

// Queue timeout: the model's only node never connects.
func TestErrorQueueTimeout(t *testing.T) {
	m := modelOn("demo", "mock", "m")
	m.QueueTimeoutSec = 0.3
	e := startEdge(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, m))
	r := post(t, e, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusServiceUnavailable, "queue_timeout")
	if st := e.Dispatcher.Status(); st.Models[0].Pending != 0 {
		t.Errorf("waiter left behind: %+v", st.Models)
	}
}

// No provider available. With a normalized config every model has at least
// one referenced candidate with capacity, so the dispatcher's ErrNoProvider
// cannot be provoked through configuration; the reachable way is an edge
// that is shutting down (dispatcher closed, HTTP still serving).
func TestErrorNoProviderAvailable(t *testing.T) {
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m")))
	e.Dispatcher.Close()
	r := post(t, e, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusServiceUnavailable, "no_provider_available")
}

// Upstream failure before the first byte: the tunnel's backend refuses the
// connection, the node answers an ERROR frame, the client gets 502.
func TestErrorUpstreamUnreachable(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", "http://"+closedPort(t)+"/v1")},
		modelOn("qwen-7b", "vllm-main", target))
	// No load reports: they would mark the backend offline, and requests
	// would then wait for it instead of reaching it (see
	// TestOfflineBackendFailsFast).
	none := 0.0
	cfg.Nodes[0].LoadReportIntervalSec = &none
	e, _ := startStack(t, cfg)
	for _, body := range []string{
		`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		// tools with tool_mode auto take the run path: same answer.
		`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`,
	} {
		r := post(t, e, "/v1/chat/completions", body)
		assertError(t, r, http.StatusBadGateway, "upstream_error")
	}
	waitReleased(t, e, "vllm-main")
	if got := metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "error"}); got != 3 {
		t.Errorf("lease releases with reason error = %v, want 3", got)
	}
}

// A provider that does not answer within limits.response_timeout_sec: 502,
// the upstream request is cancelled and the cancellation counted as
// timeout, on the tunnel and on the run path (tools + tool_mode auto).
func TestErrorResponseTimeout(t *testing.T) {
	gone := make(chan string, 4)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		gone <- r.URL.Path
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL())}, modelOn("qwen-7b", "vllm-main", target))
	cfg.Limits.ResponseTimeoutSec = 1
	e, _ := startStack(t, cfg)
	for i, body := range []string{
		`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`,
		`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`,
	} {
		r := post(t, e, "/v1/chat/completions", body)
		assertError(t, r, http.StatusBadGateway, "upstream_error")
		waitFor(t, gone, waitLong, "the upstream request to be cancelled")
		waitReleased(t, e, "vllm-main")
		stack.WaitFor(t, waitLong, "timeout counted", func() bool { return cancellations(t, e, "timeout") == float64(i+1) })
	}
	if got := metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "cancelled"}); got != 3 {
		t.Errorf("releases with reason cancelled = %v, want 3", got)
	}
}

// Unknown endpoints answer the envelope too.
func TestErrorUnknownEndpoint(t *testing.T) {
	e := startEdge(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "m")))
	r := do(t, httpClient(t), http.MethodGet, e.URL+"/v1/nope", "", nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("status %d", r.Status)
	}
	checkEnvelope(t, r.Body, "not_found")
}
