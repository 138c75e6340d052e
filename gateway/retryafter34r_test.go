package gateway_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// An HTTP-date Retry-After more than an hour ahead is bounded as
// delta-seconds are (3600, delta-seconds), so that a hostile or broken
// upstream cannot keep a Messages client away for days by writing a date
// instead of a number; a date within the hour, or past, passes as it came.
func TestMessagesRetryAfterDateBounded(t *testing.T) {
	var next atomic.Pointer[retryAnswer]
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		a := next.Load()
		w.Header().Set("Retry-After", a.retry)
		writeJSON(w, a.status, a.body)
	})
	s := tunnelStack(t, u)
	const limited = `{"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`
	soon := time.Now().Add(10 * time.Minute).UTC().Format(http.TimeFormat)
	for _, c := range []struct{ retry, want string }{
		{time.Now().Add(48 * time.Hour).UTC().Format(http.TimeFormat), "3600"},
		{"Fri, 31 Dec 9999 23:59:59 GMT", "3600"},
		{"Friday, 31-Dec-99 23:59:59 GMT", "Friday, 31-Dec-99 23:59:59 GMT"}, // RFC 850: 1999, past
		{soon, soon},
	} {
		next.Store(&retryAnswer{http.StatusTooManyRequests, c.retry, limited})
		for _, stream := range []string{"false", "true"} {
			r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
			if got := r.Header["Retry-After"]; r.Status != http.StatusTooManyRequests || len(got) != 1 || got[0] != c.want {
				t.Errorf("Retry-After %q, stream %s: %d, Retry-After %q; want %q", c.retry, stream, r.Status, got, c.want)
			}
		}
	}
}
