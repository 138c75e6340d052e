package gateway

import (
	"strings"
	"testing"
)

// The id scan of a Responses answer: found in a whole body's top-level id
// and in an event stream's first event's response.id, whatever the
// pieces the answer comes in; not looked for past responseIDScanMax
// bytes; nothing taken from a nested id, another event, or an id of
// another type.
func TestResponseIDScan36(t *testing.T) {
	created := "event: response.created\ndata: {\"response\":{\"id\":\"resp_abc\",\"created_at\":1,\"output\":[]},\"sequence_number\":0,\"type\":\"response.created\"}\n\n" +
		"event: response.in_progress\ndata: {\"response\":{\"id\":\"resp_other\"}}\n\n"
	pad := strings.Repeat("x", responseIDScanMax)
	for _, c := range []struct {
		name, answer string
		sse          bool
		want         string
	}{
		{"body", `{"id":"resp_abc","object":"response","output":[]}`, false, "resp_abc"},
		{"body, id after other members", `{"object":"response","output":[{"id":"msg_1"}],"id":"resp_abc"}`, false, "resp_abc"},
		{"body, nested id only", `{"object":"response","output":[{"id":"msg_1"}]}`, false, ""},
		{"body, id not a string", `{"id":7}`, false, ""},
		{"body, not an object", `[{"id":"resp_abc"}]`, false, ""},
		{"body, id past the bound", `{"instructions":"` + pad + `","id":"resp_abc"}`, false, ""},
		{"stream", created, true, "resp_abc"},
		{"stream, CRLF and a comment first", ": ping\r\n\r\nevent: response.created\r\ndata: {\"response\":{\"id\":\"resp_abc\"}}\r\n\r\n", true, "resp_abc"},
		{"stream, first event an error", "event: error\ndata: {\"type\":\"error\",\"message\":\"x\"}\n\n" + created, true, ""},
		{"stream, id past the bound", "event: response.created\ndata: {\"response\":{\"instructions\":\"" + pad + "\",\"id\":\"resp_abc\"}}\n\n", true, ""},
	} {
		for _, piece := range []int{1, 7, 64, 1 << 20} {
			s := newResponseIDScan(c.sse)
			got, done := "", false
			for b := []byte(c.answer); len(b) > 0 && !done; {
				n := min(piece, len(b))
				got, done = s.feed(b[:n])
				b = b[n:]
			}
			if !done && !c.sse {
				// A whole body ends with the exchange: what is known then.
				got, _ = jsonMemberString(s.buf, true, "id")
				done = true
			}
			if got != c.want || (c.want != "" && !done) {
				t.Errorf("%s in pieces of %d: id %q (done %v), want %q", c.name, piece, got, done, c.want)
			}
			if len(s.buf) > responseIDScanMax {
				t.Errorf("%s: %d bytes kept, over the bound", c.name, len(s.buf))
			}
		}
	}
}
