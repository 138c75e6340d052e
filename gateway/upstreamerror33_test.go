package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// upstreamAnswer is what the imitated upstream answers next.
type upstreamAnswer struct {
	status int
	body   string
}

// A whole answer that is an upstream's error reaches a Messages client as
// Anthropic's error envelope with the status and type Anthropic uses for
// the error, and the upstream's message with its control characters gone
// and its length bounded: an error document sent with 200 (the status read
// from the envelope's code, else its kind, else 502), and an error status.
// Both for a request that did not stream and for one that did, to which
// the upstream answered with one JSON document.
func TestMessagesWholeUpstreamError(t *testing.T) {
	var next atomic.Pointer[upstreamAnswer]
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		a := next.Load()
		writeJSON(w, a.status, a.body)
	})
	s := tunnelStack(t, u)
	long := strings.Repeat("x", 3000)
	for _, c := range []struct {
		name, body     string
		status         int
		wantStatus     int
		wantType, want string
	}{
		{"vllm 400 in 200", `{"error":{"message":"max_tokens is too large:\n\u001b[31m4096\u001b[0m\u0000.","type":"BadRequestError","param":null,"code":400}}`, 200,
			400, "invalid_request_error", "max_tokens is too large: [31m4096[0m."},
		{"flat vllm 404 in 200", `{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`, 200,
			404, "not_found_error", "The model does not exist."},
		{"llama.cpp 413 in 200", `{"error":{"code":413,"message":"too big","type":"invalid_request_error"}}`, 200,
			413, "request_too_large", "too big"},
		{"openai rate limit in 200", `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":null}}`, 200,
			429, "rate_limit_error", "slow down"},
		{"529 code in 200", `{"error":{"message":"busy","type":"overloaded_error","code":"529"}}`, 200,
			529, "overloaded_error", "busy"},
		{"503 code in 200", `{"error":{"message":"warming up","code":503}}`, 200,
			503, "overloaded_error", "warming up"},
		{"500 code in 200", `{"error":{"message":"CUDA out of memory","code":500}}`, 200,
			500, "api_error", "CUDA out of memory"},
		{"401 code in 200", `{"error":{"message":"bad key sk-abcd","code":401}}`, 200,
			502, "api_error", "The provider rejected the node's credentials (HTTP 401); the node's provider key needs attention."},
		{"unknown in 200", `{"error":{"message":"` + long + `"}}`, 200,
			502, "api_error", long[:1024] + "…"},
		{"error string in 200", `{"error":"model is loading"}`, 200,
			502, "api_error", "model is loading"},
		{"400 status", `{"error":{"message":"bad \u0007 bell","type":"invalid_request_error"}}`, 400,
			400, "invalid_request_error", "bad  bell"},
		{"404 status", `{"detail":"Not Found"}`, 404,
			404, "not_found_error", "Not Found"},
		{"413 status", `{"error":{"message":"too long"}}`, 413,
			413, "request_too_large", "too long"},
	} {
		next.Store(&upstreamAnswer{c.status, c.body})
		for _, stream := range []string{"false", "true"} {
			r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
			var env struct { // members matched by name, as encoding/json does
				Type      string
				Error     struct{ Type, Message string }
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != c.wantStatus || env.Type != "error" ||
				env.Error.Type != c.wantType || env.Error.Message != c.want || env.RequestID != r.Header.Get("request-id") ||
				!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s, stream %s: %d %s, want %d %s %q", c.name, stream, r.Status, r.Body, c.wantStatus, c.wantType, c.want)
			}
			if strings.Contains(string(r.Body), `"x"`) {
				t.Errorf("%s, stream %s: the answer carries the request: %s", c.name, stream, r.Body)
			}
		}
	}
}
