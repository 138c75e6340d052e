package anthropicapi

import (
	"net/http"
	"strings"
	"testing"
)

// A chunk carrying both choices and an error (OpenRouter's mid-stream
// error: the text that came with it and finish_reason "error") ends the
// stream with that error, after the text: nothing the model wrote is
// lost, and the stream is failed, never a complete-looking answer. A
// chunk of only an error (vLLM's) ends it the same way.
func TestStreamErrorBesideChoices(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s, `{"id":"gen-1","object":"chat.completion.chunk","created":1727000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
		`{"id":"gen-1","object":"chat.completion.chunk","created":1727000000,"model":"m","provider":"X","error":{"code":502,"message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":" tail"},"finish_reason":"error","native_finish_reason":"error"}]}`)
	out := buf.String()
	f := s.Failure()
	if f == nil || f.Status != http.StatusBadGateway || f.Message != "Provider disconnected unexpectedly" {
		t.Fatalf("failure %+v", f)
	}
	tail, fail := strings.Index(out, `"text":" tail"`), strings.Index(out, "event: error")
	if tail < 0 || fail < tail || strings.Contains(out, "message_stop") || strings.Contains(out, "message_delta") {
		t.Errorf("stream:\n%s", out)
	}

	s, buf, _ = newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"content":"a"}}]}`,
		`{"error":{"object":"error","message":"CUDA out of memory","type":"InternalServerError","param":null,"code":500}}`)
	if f := s.Failure(); f == nil || f.Status != http.StatusInternalServerError || strings.Contains(buf.String(), "message_stop") {
		t.Errorf("failure %+v, stream:\n%s", f, buf)
	}
}
