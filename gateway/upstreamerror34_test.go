package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// retryAnswer is what the imitated upstream answers next: status, body
// and the Retry-After it sends ("" none).
type retryAnswer struct {
	status      int
	retry, body string
}

// An upstream's 429 or 503 reaches a Messages client with its
// Retry-After as the OpenAI surface passes it, validated: delta-seconds
// (bounded to an hour, leading zeros gone) or an HTTP-date pass, anything
// else is no header. The answer is Anthropic's error either way, for a
// request that streamed and one that did not.
func TestMessagesUpstreamRetryAfter(t *testing.T) {
	var next atomic.Pointer[retryAnswer]
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		a := next.Load()
		if a.retry != "" {
			w.Header().Set("Retry-After", a.retry)
		}
		writeJSON(w, a.status, a.body)
	})
	s := tunnelStack(t, u)
	const limited = `{"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`
	const busy = `{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}`
	for _, c := range []struct {
		status            int
		body, retry, want string
		wantStatus        int
		wantType          string
	}{
		{429, limited, "7", "7", 429, "rate_limit_error"},
		{429, limited, "007", "7", 429, "rate_limit_error"},
		{429, limited, "86400", "3600", 429, "rate_limit_error"},
		{429, limited, "99999999999999999999999", "3600", 429, "rate_limit_error"},
		{429, limited, "Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", 429, "rate_limit_error"},
		{429, limited, "soon", "", 429, "rate_limit_error"},
		{429, limited, "-1", "", 429, "rate_limit_error"},
		{429, limited, "1.5", "", 429, "rate_limit_error"},
		{429, limited, "", "", 429, "rate_limit_error"},
		{503, busy, "30", "30", 503, "overloaded_error"},
		{503, busy, "in a while", "", 503, "overloaded_error"},
	} {
		next.Store(&retryAnswer{c.status, c.retry, c.body})
		for _, stream := range []string{"false", "true"} {
			r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
			var env struct{ Error struct{ Type string } }
			_ = json.Unmarshal(r.Body, &env)
			got, has := r.Header["Retry-After"]
			if r.Status != c.wantStatus || env.Error.Type != c.wantType || (c.want == "") == has || (has && (len(got) != 1 || got[0] != c.want)) {
				t.Errorf("%d Retry-After %q, stream %s: %d %s, Retry-After %q; want %d %s, Retry-After %q",
					c.status, c.retry, stream, r.Status, r.Body, got, c.wantStatus, c.wantType, c.want)
			}
		}
	}
}

// An error document with an empty choices array beside its error, sent
// with a success status, is that error in Anthropic's envelope and status,
// as one without choices is, not the 502 of an answer that could not be
// converted.
func TestMessagesUpstreamErrorEmptyChoices(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m","choices":[],"error":{"message":"Rate limit reached","type":"rate_limit_error","code":429}}`)
	})
	s := tunnelStack(t, u)
	for _, stream := range []string{"false", "true"} {
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		var env struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != http.StatusTooManyRequests || env.Type != "error" ||
			env.Error.Type != "rate_limit_error" || env.Error.Message != "Rate limit reached" {
			t.Errorf("stream %s: %d %s", stream, r.Status, r.Body)
		}
	}
}

// A streamed chunk with an error beside its choices (OpenRouter's
// mid-stream error) reaches a Messages client as the chunk's text and then
// the error event, with no message_stop: a failed stream, its text kept.
func TestMessagesStreamErrorBesideChoices(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, chunk(`{"role":"assistant","content":"Hello"}`, "null"),
			`data: {"id":"gen-1","object":"chat.completion.chunk","created":1727000000,"model":"m","provider":"X","error":{"code":502,"message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":" tail"},"finish_reason":"error","native_finish_reason":"error"}]}`+"\n\n",
			sseDone)
	})
	s := tunnelStack(t, u)
	r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	body := string(r.Body)
	tail, fail := strings.Index(body, `"text":" tail"`), strings.Index(body, "event: error")
	if r.Status != http.StatusOK || tail < 0 || fail < tail || !strings.Contains(body[fail:], "Provider disconnected unexpectedly") ||
		strings.Contains(body, "message_stop") {
		t.Errorf("%d\n%s", r.Status, body)
	}
}
