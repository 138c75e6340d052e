package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// An upstream's 429 reaches a Messages client as Anthropic's
// rate_limit_error with the upstream's Retry-After, which Anthropic's SDKs
// wait for before they retry; streamed or not.
func TestMessagesRateLimitKeepsRetryAfter(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		writeJSON(w, http.StatusTooManyRequests, `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`)
	})
	s := tunnelStack(t, u)
	for _, stream := range []string{"false", "true"} {
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"type":"rate_limit_error"`) ||
			!strings.Contains(string(r.Body), `"message":"slow down"`) {
			t.Fatalf("stream %s: %d %s", stream, r.Status, r.Body)
		}
		if ra := r.Header.Get("Retry-After"); ra != "7" {
			t.Errorf("stream %s: Retry-After %q, want 7", stream, ra)
		}
	}
}

// count_tokens refuses what /v1/messages refuses, in Anthropic's envelope:
// an unknown model (404 not_found_error) and a malformed body (400).
func TestCountTokensRefusals(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("count_tokens reached the upstream")
	})
	s := tunnelStack(t, u)
	for _, c := range []struct {
		body, typ string
		status    int
	}{
		{`{"model":"nope","messages":[{"role":"user","content":"x"}]}`, "not_found_error", http.StatusNotFound},
		{`{"model":"qwen-7b","messages":[]}`, "invalid_request_error", http.StatusBadRequest},
		{`{"model":"qwen-7b"`, "invalid_request_error", http.StatusBadRequest},
	} {
		r := post(t, s.Edge, "/v1/messages/count_tokens", c.body)
		if r.Status != c.status || !strings.HasPrefix(string(r.Body), `{"type":"error","error":{"type":"`+c.typ+`"`) || r.Header.Get("request-id") == "" {
			t.Errorf("%s: %d %s (request-id %q)", c.body, r.Status, r.Body, r.Header.Get("request-id"))
		}
	}
}
