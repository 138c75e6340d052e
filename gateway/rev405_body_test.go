package gateway_test

import (
	"net/http"
	"testing"
	"time"
)

// A wrong method on a served path is answered before its body is read, as
// any early refusal is: at once, then the connection lingers briefly and
// closes, whatever the body's size or pace. On the Anthropic paths the 405
// used to keep the connection open, so net/http waited for the body (up to
// limits.read_timeout_sec, 60 s here) before it wrote the answer.
func TestWrongMethodWithUnreadBodyAnsweredAtOnce(t *testing.T) {
	addr := slowBodyEdge(t, 60)
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			// Each path is its own connection and linger: side by side.
			t.Parallel()
			c := rawConn(t, addr, "PUT "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{")
			took, resp := closedWithin(t, c, 15*time.Second)
			if resp == nil || resp.StatusCode != http.StatusMethodNotAllowed {
				t.Fatalf("status %v, want 405", statusOf(resp))
			}
			if resp.Header.Get("Connection") != "close" && !resp.Close {
				t.Errorf("no Connection: close on a 405 with its body unread: %v", resp.Header)
			}
			// The linger is 2 s; the margin is for a loaded machine.
			if took > 8*time.Second {
				t.Errorf("closed after %s, want about the 2 s linger", took)
			}
		})
	}
}
