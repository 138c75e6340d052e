package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// servedPaths is every path the edge serves, with the methods it serves
// it with, in the order of Allow.
var servedPaths = []struct {
	path    string
	methods []string
}{
	{"/healthz", []string{"GET", "HEAD"}},
	{"/readyz", []string{"GET", "HEAD"}},
	{"/metrics", []string{"GET", "HEAD"}},
	{"/v1/messages", []string{"POST"}},
	{"/v1/messages/count_tokens", []string{"POST"}},
	{"/v1/models", []string{"GET", "HEAD"}},
	{"/v1/models/meta-llama/Llama-3.1-8B", []string{"GET", "HEAD"}},
	{"/v1/chat/completions", []string{"POST"}},
	{"/v1/completions", []string{"POST"}},
	{"/v1/embeddings", []string{"POST"}},
	{"/v1/responses", []string{"POST"}},
	{"/admin", []string{"GET", "HEAD"}},
	{"/admin/events", []string{"GET", "HEAD"}},
	{"/admin/status", []string{"GET", "HEAD"}},
	{"/admin/reload", []string{"POST"}},
	{"/admin/nodes/n1/refresh", []string{"POST"}},
	{"/admin/nodes/n1/commands/usage", []string{"GET", "HEAD"}},
	{"/admin/sessions/s1/terminate", []string{"POST"}},
}

func method405Stack(t *testing.T) string {
	t.Helper()
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = []string{"sk-app"}
	cfg.Auth.AdminToken = "admin-secret"
	return startEdge(t, cfg).URL
}

// A served path asked with a method it is not served with is answered 405
// with Allow listing the methods it is served with, in the OpenAI envelope
// (code method_not_allowed) and in Anthropic's shape on /v1/messages*; it
// was a 404 not_found that read as a wrong URL. Without credentials too:
// which methods a path takes is public, as the paths are.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	url := method405Stack(t)
	c := httpClient(t)
	for _, p := range servedPaths {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"} {
			if slices.Contains(p.methods, m) {
				continue
			}
			r := do(t, c, m, url+p.path, "", nil)
			if r.Status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d %s, want 405", m, p.path, r.Status, r.Body)
				continue
			}
			if got, want := r.Header.Get("Allow"), strings.Join(p.methods, ", "); got != want {
				t.Errorf("%s %s: Allow %q, want %q", m, p.path, got, want)
			}
			if m == "HEAD" {
				continue // no body
			}
			if strings.HasPrefix(p.path, "/v1/messages") {
				checkAnthropic405(t, m+" "+p.path, r)
				continue
			}
			assertError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		}
	}
}

func checkAnthropic405(t *testing.T, what string, r response) {
	t.Helper()
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil || env.Type != "error" || env.Error.Type != "invalid_request_error" || env.Error.Message == "" {
		t.Errorf("%s: not Anthropic's error shape: %s", what, r.Body)
	}
	if r.Header.Get("request-id") == "" || env.RequestID != r.Header.Get("request-id") {
		t.Errorf("%s: request-id header %q, body %q", what, r.Header.Get("request-id"), env.RequestID)
	}
}

// The served methods are served as before (auth first), unknown paths stay
// 404, the HEAD probes stay 200, and OPTIONS, the CORS preflight's method,
// keeps its 404 with CORS off.
func TestServedMethodsAndUnknownPathsUnchanged(t *testing.T) {
	url := method405Stack(t)
	c := httpClient(t)
	assertError(t, do(t, c, http.MethodPost, url+"/v1/chat/completions", `{}`, nil), http.StatusUnauthorized, "invalid_api_key")
	assertError(t, do(t, c, http.MethodGet, url+"/admin/status", "", nil), http.StatusUnauthorized, "invalid_admin_token")
	if r := do(t, c, http.MethodGet, url+"/v1/models", "", map[string]string{"Authorization": "Bearer sk-app"}); r.Status != http.StatusOK {
		t.Errorf("GET /v1/models: %d %s", r.Status, r.Body)
	}
	for _, p := range []string{"/healthz", "/admin"} {
		if r := do(t, c, http.MethodHead, url+p, "", nil); r.Status != http.StatusOK || r.Header.Get("Allow") != "" {
			t.Errorf("HEAD %s: %d Allow %q", p, r.Status, r.Header.Get("Allow"))
		}
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		for _, p := range []string{"/v1/nope", "/v1/chat", "/nope", "/v1/messages/nope", "/admin/nodes"} {
			r := do(t, c, m, url+p, "", nil)
			assertError(t, r, http.StatusNotFound, "not_found")
			if r.Header.Get("Allow") != "" {
				t.Errorf("%s %s: Allow %q on a 404", m, p, r.Header.Get("Allow"))
			}
		}
	}
	r := do(t, c, http.MethodOptions, url+"/v1/chat/completions", "", nil)
	assertError(t, r, http.StatusNotFound, "not_found")
	if r.Header.Get("Allow") != "" {
		t.Errorf("OPTIONS: Allow %q", r.Header.Get("Allow"))
	}
}
