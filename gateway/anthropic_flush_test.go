package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/gateway/anthropicapi"
)

// An upstream's first chunk often carries only the role (vLLM, OpenAI):
// it converts to no Messages event. The relay's flush after it (the next
// chunk has not arrived yet) starts the stream with its own headers,
// message_start and one ping, as Anthropic's API does; it must not commit
// the response bare (text/plain, without the request-id).
func TestMessagesFlushBeforeFirstEventStartsTheStream(t *testing.T) {
	rec, mw := streamingMessagesWriter(t)
	write := func(s string) {
		t.Helper()
		if _, err := mw.Write([]byte(s)); err != nil {
			t.Fatalf("write %q: %v", s, err)
		}
	}
	write("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
	mw.Flush()
	if first := rec.Body.String(); !rec.Flushed || !strings.HasPrefix(first, "event: message_start\n") || !strings.HasSuffix(first, "event: ping\ndata: {\"type\":\"ping\"}\n\n") {
		t.Errorf("after the first flush: flushed %v, body %q", rec.Flushed, first)
	}
	write("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n")
	mw.Flush()
	write("data: [DONE]\n\n")
	mw.finish()
	res := rec.Result()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	if id := res.Header.Get("request-id"); id != "req_1" {
		t.Errorf("request-id = %q, want req_1", id)
	}
	body := rec.Body.String()
	if !strings.HasPrefix(body, "event: message_start\n") || !strings.Contains(body, "event: message_stop\n") ||
		strings.Count(body, "event: ping\n") != 1 || strings.Index(body, "event: ping\n") > strings.Index(body, "event: content_block_start\n") {
		t.Errorf("body = %q", body)
	}
}

// streamingMessagesWriter is a Messages writer over a recorder for a
// streamed request, its upstream answer begun as an event stream (200):
// what the relay hands it before the first chunk.
func streamingMessagesWriter(t *testing.T) (*httptest.ResponseRecorder, *messagesWriter) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	mw := &messagesWriter{ResponseWriter: c.Writer, header: http.Header{}, requestID: "req_1"}
	req, aerr := anthropicapi.ParseRequest([]byte(`{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	mw.start(req, 3)
	mw.Header().Set("Content-Type", "text/event-stream")
	mw.WriteHeader(http.StatusOK)
	return rec, mw
}
