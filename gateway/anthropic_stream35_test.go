package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// A stream whose first event is the upstream's error is answered as that
// error's status with the upstream's Retry-After; what the upstream sends
// after it, write by write and flush by flush as the relay hands it on,
// reaches no one (no stream is started behind the error).
func TestMessagesStreamFirstEventErrorAnswered35(t *testing.T) {
	rec, mw := streamingMessagesWriter(t)
	mw.Header().Set("Content-Type", "text/event-stream")
	mw.Header().Set("Retry-After", "9")
	for _, s := range []string{
		`data: {"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}` + "\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":"late"}}]}` + "\n\n",
		"data: [DONE]\n\n",
	} {
		if n, err := mw.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
		mw.Flush()
	}
	mw.finish()
	res := rec.Result()
	var env struct {
		Error struct{ Type, Message string }
	}
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "9" || json.Unmarshal(rec.Body.Bytes(), &env) != nil ||
		env.Error.Type != "rate_limit_error" || strings.Contains(rec.Body.String(), "late") {
		t.Fatalf("%d, Retry-After %q: %s", res.StatusCode, res.Header.Get("Retry-After"), rec.Body)
	}
}
