package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// codedPost sends body to path with the Content-Encoding lines given, one
// header line each; chunked sends it without a length.
func codedPost(t *testing.T, url, body string, chunked bool, codings []string, hdr map[string]string) response {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // no length known: Transfer-Encoding: chunked
	}
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, c := range codings {
		req.Header.Add("Content-Encoding", c)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// A coding is refused in whatever form it comes: on a later
// Content-Encoding line, in a chunked body, and on count_tokens (the
// Anthropic envelope, with Accept-Encoding kept). A body declared larger
// than max_body_bytes is a 413 whatever its coding: decoded, it would be
// larger still.
func TestContentCodingForms(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Limits.MaxBodyBytes = 1 << 10
	e, _ := startStack(t, cfg)
	chat := `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`

	r := codedPost(t, e.URL+"/v1/chat/completions", gzipped(t, chat), false, []string{"identity", "gzip"}, nil)
	assertError(t, r, http.StatusUnsupportedMediaType, "invalid_request")
	if r.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("second line: Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
	}
	r = codedPost(t, e.URL+"/v1/chat/completions", gzipped(t, chat), true, []string{"gzip"}, nil)
	assertError(t, r, http.StatusUnsupportedMediaType, "invalid_request")
	r = codedPost(t, e.URL+"/v1/chat/completions", chat, false, []string{"identity", ""}, nil)
	if r.Status != http.StatusOK {
		t.Errorf("identity and an empty line: %d %s", r.Status, r.Body)
	}

	anth := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	r = codedPost(t, e.URL+"/v1/messages/count_tokens", gzipped(t, `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`), false, []string{"gzip"}, anth)
	if r.Status != http.StatusUnsupportedMediaType || !strings.Contains(string(r.Body), `"type":"error"`) || r.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("count_tokens: %d %v %s", r.Status, r.Header, r.Body)
	}

	r = codedPost(t, e.URL+"/v1/chat/completions", strings.Repeat(" ", 2<<10)+chat, false, []string{"gzip"}, nil)
	assertError(t, r, http.StatusRequestEntityTooLarge, "request_too_large")
	if r.Header.Get("Accept-Encoding") != "" {
		t.Errorf("413: Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
	}
}

// A Messages error carries Retry-After and Accept-Encoding only when the
// answer it converts had them: an empty Retry-After is no delay at all,
// and SDKs read the header whenever it is present.
func TestMessagesErrorHeadersOnlyWhenSet(t *testing.T) {
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo")))
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/messages", `{"model":"nope","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"})
	if r.Status < 400 || r.Status == http.StatusTooManyRequests || r.Status == http.StatusServiceUnavailable {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	for _, k := range []string{"Retry-After", "Accept-Encoding"} {
		if v, ok := r.Header[k]; ok {
			t.Errorf("%d: %s %q", r.Status, k, v)
		}
	}
}
