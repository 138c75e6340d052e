package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

const (
	appOrigin   = "https://chat.example.com"
	otherOrigin = "https://evil.example.net"
)

// corsStack is an edge with keys and a mock model ("demo") whose browser
// app is appOrigin (or what origins says).
func corsStack(t *testing.T, origins ...string) *stack.Edge {
	t.Helper()
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = []string{"sk-app"}
	cfg.Auth.AdminToken = "admin-secret"
	cfg.CORS.AllowedOrigins = origins
	e, _ := startStack(t, cfg)
	return e
}

// preflight is what a browser sends before a cross-origin POST with an
// Authorization header, as the OpenAI JavaScript SDK does.
func preflight(t *testing.T, url, origin, headers string) response {
	t.Helper()
	return do(t, httpClient(t), http.MethodOptions, url, "", map[string]string{
		"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": headers,
	})
}

// corsHeaders are the response's Access-Control-* headers.
func corsHeaders(h http.Header) []string {
	var out []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// An allowed origin's preflight is answered 204 with the methods, the
// requested headers the surfaces read (not others) and a max age; it
// needs no key and is not counted as a request.
func TestCORSPreflightAllowed(t *testing.T) {
	e := corsStack(t, appOrigin)
	sdk := "authorization, content-type, x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, " +
		"x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout, x-iop-priority, x-request-id, x-custom"
	for path, hdrs := range map[string]string{
		"/v1/chat/completions": sdk,
		"/v1/models":           "authorization",
		"/v1/messages":         "anthropic-dangerous-direct-browser-access,anthropic-version,content-type,x-api-key,anthropic-beta",
	} {
		r := preflight(t, e.URL+path, appOrigin, hdrs)
		if r.Status != http.StatusNoContent || len(r.Body) != 0 {
			t.Errorf("%s: %d %s", path, r.Status, r.Body)
		}
		want := map[string]string{
			"Access-Control-Allow-Origin":  appOrigin,
			"Access-Control-Allow-Methods": "GET, POST",
			"Access-Control-Max-Age":       "600",
			"Vary":                         "Origin",
		}
		wantHdrs := strings.ReplaceAll(strings.TrimSuffix(hdrs, ", x-custom"), ",", ", ")
		wantHdrs = strings.ReplaceAll(wantHdrs, ",  ", ", ")
		want["Access-Control-Allow-Headers"] = wantHdrs
		for k, v := range want {
			if got := strings.Join(r.Header.Values(k), ","); got != v {
				t.Errorf("%s: %s = %q, want %q", path, k, got, v)
			}
		}
		if r.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("%s: credentials allowed", path)
		}
	}
	if got := requestsByCode(t, e); len(got) != 0 {
		t.Errorf("preflights counted as requests: %v", got)
	}
}

// A preflight from another origin gets no CORS header (the browser then
// refuses the call): a 403 in the envelope, for whoever debugs it.
// Neither do /admin, /metrics and the probes, whatever the origin.
func TestCORSRefusedAndNeverOutsideV1(t *testing.T) {
	e := corsStack(t, appOrigin)
	r := preflight(t, e.URL+"/v1/chat/completions", otherOrigin, "authorization")
	assertError(t, r, http.StatusForbidden, "origin_not_allowed")
	if h := corsHeaders(r.Header); len(h) != 0 {
		t.Errorf("refused preflight carries %v", h)
	}
	for _, p := range []string{"/admin/status", "/admin/reload", "/metrics", "/healthz", "/readyz", "/admin"} {
		r := preflight(t, e.URL+p, appOrigin, "authorization")
		if h := corsHeaders(r.Header); len(h) != 0 || r.Status == http.StatusNoContent {
			t.Errorf("preflight %s: %d %v", p, r.Status, h)
		}
		r = do(t, httpClient(t), http.MethodGet, e.URL+p, "", map[string]string{"Origin": appOrigin, "Authorization": "Bearer admin-secret"})
		if h := corsHeaders(r.Header); len(h) != 0 || strings.Contains(r.Header.Get("Vary"), "Origin") {
			t.Errorf("GET %s: %d %v vary %q", p, r.Status, h, r.Header.Get("Vary"))
		}
	}
	// Not a preflight (no Access-Control-Request-Method): as without CORS.
	r = do(t, httpClient(t), http.MethodOptions, e.URL+"/v1/chat/completions", "", map[string]string{"Origin": appOrigin})
	assertError(t, r, http.StatusNotFound, "not_found")
}

// Answers to an allowed origin carry the origin, Vary and the headers an
// app may read, errors too (else the browser hides them from the app):
// success, stream, 401, 404, 413, on both surfaces. Another origin's get
// none.
func TestCORSActualAnswersAndErrors(t *testing.T) {
	e := corsStack(t, appOrigin)
	c := httpClient(t)
	key := map[string]string{"Origin": appOrigin, "Authorization": "Bearer sk-app"}
	badKey := map[string]string{"Origin": appOrigin, "Authorization": "Bearer sk-wrong"}
	anthropic := map[string]string{"Origin": appOrigin, "x-api-key": "sk-app", "anthropic-version": "2023-06-01"}
	anthropicBad := map[string]string{"Origin": appOrigin, "x-api-key": "sk-wrong", "anthropic-version": "2023-06-01"}
	big := `{"model":"demo","messages":[{"role":"user","content":"` + strings.Repeat("x", 9<<20) + `"}]}`
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
	}{
		{"chat", http.MethodPost, "/v1/chat/completions", chatBody("demo", "hi", false), key, 200},
		{"stream", http.MethodPost, "/v1/chat/completions", chatBody("demo", "hi", true), key, 200},
		{"models", http.MethodGet, "/v1/models", "", key, 200},
		{"bad key", http.MethodPost, "/v1/chat/completions", chatBody("demo", "hi", false), badKey, 401},
		{"unknown model", http.MethodPost, "/v1/chat/completions", chatBody("gpt-9", "hi", false), key, 404},
		{"too large", http.MethodPost, "/v1/chat/completions", big, key, 413},
		{"unknown path", http.MethodPost, "/v1/nope", "{}", key, 404},
		{"messages", http.MethodPost, "/v1/messages", `{"model":"demo","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, anthropic, 200},
		{"messages stream", http.MethodPost, "/v1/messages", `{"model":"demo","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, anthropic, 200},
		{"messages bad key", http.MethodPost, "/v1/messages", `{"model":"demo","max_tokens":8,"messages":[]}`, anthropicBad, 401},
	}
	for _, tc := range cases {
		r := do(t, c, tc.method, e.URL+tc.path, tc.body, tc.hdr)
		if r.Status != tc.status {
			t.Errorf("%s: status %d, want %d: %.200s", tc.name, r.Status, tc.status, r.Body)
		}
		if got := r.Header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != appOrigin {
			t.Errorf("%s: Access-Control-Allow-Origin %q", tc.name, got)
		}
		if got := r.Header.Get("Vary"); got != "Origin" {
			t.Errorf("%s: Vary %q", tc.name, got)
		}
		expose := r.Header.Get("Access-Control-Expose-Headers")
		for _, h := range []string{"X-Request-Id", "Request-Id", "Retry-After"} {
			if !strings.Contains(expose, h) {
				t.Errorf("%s: %s not exposed: %q", tc.name, h, expose)
			}
		}
		if r.Header.Get("Access-Control-Allow-Credentials") != "" || r.Header.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("%s: %v", tc.name, corsHeaders(r.Header))
		}
	}
	other := map[string]string{"Origin": otherOrigin, "Authorization": "Bearer sk-app"}
	r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", "hi", false), other)
	if r.Status != http.StatusOK || len(corsHeaders(r.Header)) != 0 || r.Header.Get("Vary") != "Origin" {
		t.Errorf("other origin: %d %v vary %q", r.Status, corsHeaders(r.Header), r.Header.Get("Vary"))
	}
}

// "*" answers every origin with "*", and nothing varies by origin.
func TestCORSAnyOrigin(t *testing.T) {
	e := corsStack(t, "*")
	r := preflight(t, e.URL+"/v1/chat/completions", otherOrigin, "authorization")
	if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Vary") != "" {
		t.Errorf("preflight: %d %v vary %q", r.Status, r.Header, r.Header.Get("Vary"))
	}
	r = do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", "hi", false), map[string]string{"Origin": otherOrigin})
	if r.Status != http.StatusUnauthorized || r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Vary") != "" {
		t.Errorf("answer: %d %v", r.Status, r.Header)
	}
}

// Without cors.allowed_origins the edge answers as it always has: a
// preflight is a 404 and no answer carries a CORS header or Vary.
func TestCORSOffAnswersUnchanged(t *testing.T) {
	e := corsStack(t)
	c := httpClient(t)
	r := preflight(t, e.URL+"/v1/chat/completions", appOrigin, "authorization")
	assertError(t, r, http.StatusNotFound, "not_found")
	if h := corsHeaders(r.Header); len(h) != 0 || r.Header.Get("Vary") != "" {
		t.Errorf("preflight: %v", r.Header)
	}
	for _, tc := range []struct {
		body, key string
		want      []string
	}{
		{chatBody("demo", "hi", false), "sk-app", []string{"Content-Length", "Content-Type", "Date", "X-Request-Id"}},
		{chatBody("demo", "hi", false), "sk-wrong", []string{"Content-Length", "Content-Type", "Date", "X-Request-Id"}},
	} {
		r := do(t, c, http.MethodPost, e.URL+"/v1/chat/completions", tc.body, map[string]string{"Origin": appOrigin, "Authorization": "Bearer " + tc.key})
		var got []string
		for k := range r.Header {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("key %s: headers %v, want %v", tc.key, got, tc.want)
		}
	}
}

// A reload turns CORS on, changes the origins and turns it off.
func TestCORSFollowsReload(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	e := startEdge(t, cfg)
	for _, origins := range [][]string{{appOrigin}, {otherOrigin}, nil} {
		next := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
		next.CORS.AllowedOrigins = origins
		if err := next.Normalize(); err != nil {
			t.Fatal(err)
		}
		e.Server.SetConfig(next)
		r := preflight(t, e.URL+"/v1/models", appOrigin, "authorization")
		wantStatus := map[int]int{1: http.StatusNoContent}[len(origins)]
		switch {
		case origins == nil:
			wantStatus = http.StatusNotFound
		case origins[0] != appOrigin:
			wantStatus = http.StatusForbidden
		}
		if r.Status != wantStatus {
			t.Errorf("origins %v: preflight %d, want %d", origins, r.Status, wantStatus)
		}
	}
}

// An upstream's own CORS headers never reach the client: with CORS off they
// would open the edge to every origin, with it on a second
// Access-Control-Allow-Origin makes the browser refuse the answer.
func TestTunnelDropsUpstreamCORSHeaders(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("Access-Control-Expose-Headers", "X-Secret")
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	for _, origins := range [][]string{nil, {appOrigin}} {
		s := tunnelStack(t, u, func(c *config.Edge) { c.CORS.AllowedOrigins = origins })
		r := do(t, httpClient(t), http.MethodPost, s.Edge.URL+"/v1/chat/completions", chatBody("qwen-7b", "hi", false), map[string]string{"Origin": appOrigin})
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		want := []string(nil)
		if origins != nil {
			want = []string{appOrigin}
		}
		if got := r.Header.Values("Access-Control-Allow-Origin"); !slices.Equal(got, want) || r.Header.Get("Access-Control-Allow-Credentials") != "" ||
			strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-Secret") {
			t.Errorf("origins %v: %v", origins, r.Header)
		}
	}
}
