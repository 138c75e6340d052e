package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// split35rError is vLLM's error chunk opening a stream, CRLF line ends
// (which appendLF makes LF, across writes too).
const split35rError = "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\r\n\r\n"

// A stream's first event that is the upstream's error is answered with
// its status wherever the transport split it: the relay flushes after
// every write, and a flush in the middle of the first event must not
// start the stream (a 200 with one error event) that the whole event
// would have answered with a 429.
func TestMessagesStreamFirstEventErrorSplit35r(t *testing.T) {
	for k := 1; k < len(split35rError); k++ {
		rec, mw := streamingMessagesWriter(t)
		for _, s := range []string{split35rError[:k], split35rError[k:],
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n", "data: [DONE]\n\n"} {
			if n, err := mw.Write([]byte(s)); err != nil || n != len(s) {
				t.Fatalf("split %d: write %q: %d, %v", k, s, n, err)
			}
			mw.Flush()
		}
		mw.finish()
		var env struct{ Error struct{ Type string } }
		if rec.Code != 429 || json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Error.Type != "rate_limit_error" {
			t.Fatalf("split at %d: %d %q", k, rec.Code, rec.Body)
		}
	}
}

// A first event that is a chunk, split anywhere, is relayed as it is
// whole: the stream starts with it (message_start, its text, one ping),
// and once it has started a flush sends what there is at once. After a
// whole event that converts to nothing, a flush still starts the stream.
func TestMessagesStreamFirstChunkSplit35r(t *testing.T) {
	const first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n"
	for k := 1; k < len(first); k++ {
		rec, mw := streamingMessagesWriter(t)
		write := func(s string) {
			t.Helper()
			if n, err := mw.Write([]byte(s)); err != nil || n != len(s) {
				t.Fatalf("split %d: write %q: %d, %v", k, s, n, err)
			}
		}
		write(first[:k])
		mw.Flush()
		if rec.Body.Len() != 0 {
			t.Fatalf("split %d: %q written before the first event ended", k, rec.Body)
		}
		write(first[k:])
		body := rec.Body.String()
		if !strings.HasPrefix(body, "event: message_start\n") || !strings.Contains(body, `"text":"Hi"`) || strings.Count(body, "event: ping\n") != 1 {
			t.Fatalf("split %d: after the first event: %q", k, body)
		}
		write("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"}}]}\n\n")
		mw.Flush()
		if !rec.Flushed || !strings.Contains(rec.Body.String(), `"text":" there"`) {
			t.Fatalf("split %d: second chunk not flushed: %q", k, rec.Body)
		}
		write("data: [DONE]\n\n")
		mw.finish()
		if body := rec.Body.String(); rec.Code != 200 || !strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Fatalf("split %d: %d %q", k, rec.Code, body)
		}
	}
	// A keepalive comment is a whole event, and a blank line more after
	// an event begins none: the flush after either starts the stream.
	for _, s := range []string{": keepalive\n\n", "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n\n"} {
		rec, mw := streamingMessagesWriter(t)
		if _, err := mw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		mw.Flush()
		if !rec.Flushed || !strings.HasPrefix(rec.Body.String(), "event: message_start\n") {
			t.Fatalf("a flush after %q: flushed %v, %q", s, rec.Flushed, rec.Body)
		}
	}
}

// The error event and what follows it in the same write (one read of the
// upstream's stream, as vLLM sends its error chunk and [DONE] together):
// the answer is the error alone, nothing converted behind it.
func TestMessagesStreamFirstEventErrorOneWrite35r(t *testing.T) {
	rec, mw := streamingMessagesWriter(t)
	s := split35rError + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\ndata: [DONE]\n\n"
	if n, err := mw.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("write: %d, %v", n, err)
	}
	mw.Flush()
	mw.finish()
	var env struct{ Error struct{ Type string } }
	if rec.Code != 429 || json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Error.Type != "rate_limit_error" {
		t.Fatalf("%d %q", rec.Code, rec.Body)
	}
}
