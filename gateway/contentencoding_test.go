package gateway_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// gzipped is s compressed with gzip.
func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A request body sent with a content coding (a client that compresses
// its requests) is answered 415 with Accept-Encoding: identity and the
// invalid_request envelope, on every route that reads a body; it used to
// be a 400 saying the body was not JSON. identity (alone or listed) is
// no coding and stays accepted. The key is checked first.
func TestContentCodedBodyIs415(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = []string{"sk-app"}
	e, _ := startStack(t, cfg)
	chat := `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`
	bodies := map[string]string{
		"/v1/chat/completions": chat,
		"/v1/completions":      `{"model":"demo","prompt":"hello"}`,
		"/v1/embeddings":       `{"model":"demo","input":"hello"}`,
		"/v1/responses":        `{"model":"demo","input":"hello"}`,
	}
	auth := map[string]string{"Authorization": "Bearer sk-app"}
	with := func(coding string, h map[string]string) map[string]string {
		out := map[string]string{"Content-Encoding": coding}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	for path, body := range bodies {
		for _, coding := range []string{"gzip", "GZIP", "identity, gzip", "br", "deflate", "zstd"} {
			r := do(t, httpClient(t), http.MethodPost, e.URL+path, gzipped(t, body), with(coding, auth))
			assertError(t, r, http.StatusUnsupportedMediaType, "invalid_request")
			if r.Header.Get("Accept-Encoding") != "identity" {
				t.Errorf("%s %q: Accept-Encoding %q", path, coding, r.Header.Get("Accept-Encoding"))
			}
		}
	}
	for _, coding := range []string{"identity", "Identity", "identity, identity", ""} {
		r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", chat, with(coding, auth))
		if r.Status != http.StatusOK {
			t.Errorf("Content-Encoding %q: %d %s", coding, r.Status, r.Body)
		}
	}
	// The key first: a caller without one learns nothing else.
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", gzipped(t, chat), with("gzip", nil))
	assertError(t, r, http.StatusUnauthorized, "invalid_api_key")
	// A route that reads no body does not refuse one.
	r = do(t, httpClient(t), http.MethodGet, e.URL+"/v1/models", gzipped(t, "{}"), with("gzip", auth))
	if r.Status != http.StatusOK {
		t.Errorf("GET /v1/models with a coded body: %d %s", r.Status, r.Body)
	}
	// Anthropic's surface: the same 415, in its envelope.
	r = do(t, httpClient(t), http.MethodPost, e.URL+"/v1/messages", gzipped(t, `{"model":"demo","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`),
		with("gzip", map[string]string{"x-api-key": "sk-app", "anthropic-version": "2023-06-01"}))
	if r.Status != http.StatusUnsupportedMediaType || !strings.Contains(string(r.Body), `"type":"error"`) || !strings.Contains(string(r.Body), "Content-Encoding") {
		t.Errorf("messages: %d %s", r.Status, r.Body)
	}
	if r.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("messages: Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
	}
	if got := requestsByCode(t, e); got["415"] != float64(len(bodies)*6+1) {
		t.Errorf("requests by code %v, want %d counted 415", got, len(bodies)*6+1)
	}
}

// A large compressed body is refused without being read, and the client
// still gets its 415 (the connection lingers rather than resetting while
// the client is still sending), as for an early 401 or 413.
func TestContentCodedLargeBodyAnswered(t *testing.T) {
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo")))
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(strings.Repeat("x", 4<<20)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	assertError(t, response{Status: resp.StatusCode, Header: resp.Header, Body: b}, http.StatusUnsupportedMediaType, "invalid_request")
	if !resp.Close {
		t.Error("the connection stays open: the unread body would be drained in full")
	}
}
