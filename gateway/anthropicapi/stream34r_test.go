package anthropicapi

import (
	"net/http"
	"strings"
	"testing"
)

// An error chunk whose choice cannot be converted (a tool call delta that
// starts without a name) still ends the stream with the upstream's error,
// as an error chunk did before choices beside it were converted: not the
// 502 of a malformed chunk, which would hide the upstream's status.
func TestStreamErrorBesideMalformedChoice(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"}}]}`)
	err := s.Chunk([]byte(`{"error":{"code":429,"message":"Rate limit exceeded upstream"},"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"finish_reason":"error"}]}`))
	f := s.Failure()
	if err != nil || f == nil || f.Status != http.StatusTooManyRequests || f.Message != "Rate limit exceeded upstream" {
		t.Fatalf("err %v, failure %+v", err, f)
	}
	if out := buf.String(); !strings.Contains(out, "event: error") || strings.Contains(out, "message_stop") {
		t.Errorf("stream:\n%s", out)
	}
}
