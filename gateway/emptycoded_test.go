package gateway_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// An empty body (Content-Length: 0) has nothing to decode whatever its
// Content-Encoding says, so it is answered as any empty body is (400, the
// body is not a JSON request), not 415 asking for an uncoded body the
// client already sent. On the Anthropic surface too.
func TestEmptyCodedBodyIsAnsweredAsEmpty(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = []string{"sk-app"}
	e, _ := startStack(t, cfg)
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"}
	for _, path := range paths {
		plain := do(t, httpClient(t), http.MethodPost, e.URL+path, "", map[string]string{"Authorization": "Bearer sk-app"})
		if plain.Status != http.StatusBadRequest {
			t.Fatalf("%s empty: %d %s", path, plain.Status, plain.Body)
		}
		for _, coding := range []string{"gzip", "br", "identity, zstd"} {
			r := do(t, httpClient(t), http.MethodPost, e.URL+path, "", map[string]string{"Authorization": "Bearer sk-app", "Content-Encoding": coding})
			if r.Status != plain.Status || withoutRequestID(r.Body) != withoutRequestID(plain.Body) {
				t.Errorf("%s Content-Encoding %q, empty: %d %s, want as without it: %d %s", path, coding, r.Status, r.Body, plain.Status, plain.Body)
			}
			if r.Header.Get("Accept-Encoding") != "" {
				t.Errorf("%s %q: Accept-Encoding %q on an empty body", path, coding, r.Header.Get("Accept-Encoding"))
			}
		}
	}
	// A body with content and a coding is still refused unread.
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", "x", map[string]string{"Authorization": "Bearer sk-app", "Content-Encoding": "gzip"})
	assertError(t, r, http.StatusUnsupportedMediaType, "invalid_request")
}

var requestIDMember = regexp.MustCompile(`"request_id":"[^"]*"`)

// withoutRequestID is an answer body with its request id (one per request)
// blanked.
func withoutRequestID(b []byte) string {
	return string(requestIDMember.ReplaceAll(b, []byte(`"request_id":""`)))
}
