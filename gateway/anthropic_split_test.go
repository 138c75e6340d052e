package gateway

import (
	"strings"
	"testing"
)

// The relay writes the upstream's bytes as they come, so an event's end
// (the blank line) and a CRLF line end may each be split between two
// writes: the events still convert one by one, none merged with the next
// and none cut at a line end that is half of a CRLF.
func TestMessagesEventBoundariesSplitAcrossWrites(t *testing.T) {
	rec, mw := streamingMessagesWriter(t)
	for _, s := range []string{
		`data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n", "\n",
		`data: {"choices":[{"index":0,"delta":{"content":" there"}}]}` + "\n\n",
		`data: {"choices":[{"index":0,` + "\r", "\n" + `data: "delta":{"content":"!"},"finish_reason":"stop"}]}` + "\r\n\r\n",
		"data: [DONE]\n\n",
	} {
		if _, err := mw.Write([]byte(s)); err != nil {
			t.Fatalf("write %q: %v", s, err)
		}
	}
	mw.finish()
	body := rec.Body.String()
	if strings.Count(body, "event: content_block_delta\n") != 3 || !strings.Contains(body, `"text":" there"`) ||
		!strings.Contains(body, `"text":"!"`) || !strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("body = %q", body)
	}
}
