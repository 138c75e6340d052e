package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// retry35Answer is what the upstream of TestMessagesErrorDocumentRetryAfter
// answers with a 200: its Retry-After ("" none), and a whole JSON error
// document or an event stream whose first event is that error.
type retry35Answer struct {
	retry, body string
	sse         bool
}

// An upstream's error document sent with a 200 (a whole answer, with or
// without an empty choices array beside its error, or an event stream
// whose first event is the error) reaches a Messages client as that
// error's status in Anthropic's envelope with the upstream's Retry-After
// passed on as on an error status: validated, delta-seconds bounded to an
// hour, anything else no header. Streamed or not (the event stream to a
// stream request).
func TestMessagesErrorDocumentRetryAfter(t *testing.T) {
	var next atomic.Pointer[retry35Answer]
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		a := next.Load()
		if a.retry != "" {
			w.Header().Set("Retry-After", a.retry)
		}
		if !a.sse {
			writeJSON(w, http.StatusOK, a.body)
			return
		}
		// As vLLM's server streams an error: its error chunk, then [DONE];
		// a chunk after the error (a broken upstream) reaches no one.
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: " + a.body + "\n\n" + `data: {"choices":[{"index":0,"delta":{"content":"late"}}]}` + "\n\ndata: [DONE]\n\n"))
	})
	s := tunnelStack(t, u)
	const limited = `{"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`
	const limitedChoices = `{"choices":[],"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`
	const busy = `{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}`
	for _, c := range []struct {
		body, retry, want string
		wantStatus        int
		wantType          string
	}{
		{limited, "7", "7", 429, "rate_limit_error"},
		{limitedChoices, "007", "7", 429, "rate_limit_error"},
		{limited, "86400", "3600", 429, "rate_limit_error"},
		{limited, "Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", 429, "rate_limit_error"},
		{limited, "Fri, 31 Dec 9999 23:59:59 GMT", "3600", 429, "rate_limit_error"},
		{limited, "soon", "", 429, "rate_limit_error"},
		{limited, "", "", 429, "rate_limit_error"},
		{busy, "30", "30", 502, "api_error"},
	} {
		for _, sse := range []bool{false, true} {
			next.Store(&retry35Answer{c.retry, c.body, sse})
			for _, stream := range []string{"false", "true"} {
				if sse && stream == "false" {
					continue // a stream to a request that did not ask for one is not converted
				}
				r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
				var env struct{ Error struct{ Type string } }
				_ = json.Unmarshal(r.Body, &env)
				got, has := r.Header["Retry-After"]
				if r.Status != c.wantStatus || env.Error.Type != c.wantType || (c.want == "") == has || (has && (len(got) != 1 || got[0] != c.want)) ||
					strings.Contains(string(r.Body), "event:") || strings.Contains(string(r.Body), "late") {
					t.Errorf("%s Retry-After %q, sse %v, stream %s: %d %s, Retry-After %q; want %d %s, Retry-After %q",
						c.body, c.retry, sse, stream, r.Status, r.Body, got, c.wantStatus, c.wantType, c.want)
				}
			}
		}
	}
	waitReleased(t, s.Edge, "vllm-main")
}
