package anthropicapi

import (
	"bytes"
	"strings"
	"testing"
)

// A model that thinks at length for a client that did not enable thinking
// leaves the stream silent, all its reasoning dropped: a proxy or client
// read timeout would cut the answer before its text. The writer sends a
// ping for every HiddenThinkingPingBytes of dropped reasoning, so the
// stream shows life while the model thinks; with thinking enabled the
// thinking deltas do, and no ping is added.
func TestHiddenThinkingPings(t *testing.T) {
	piece := `{"choices":[{"index":0,"delta":{"reasoning":"` + strings.Repeat("x", 512) + `"}}]}`
	const pieces = 40 // 20 KiB of reasoning
	for _, thinking := range []bool{false, true} {
		var buf bytes.Buffer
		s := NewStreamWriter(&buf, nil, "m", 1, nil, thinking)
		if err := s.Ping(); err != nil { // as the edge starts a stream
			t.Fatal(err)
		}
		for range pieces {
			if err := s.Chunk([]byte(piece)); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []string{`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`, `[DONE]`} {
			if err := s.Chunk([]byte(c)); err != nil {
				t.Fatal(err)
			}
		}
		checkEvents(t, buf.Bytes())
		pings := strings.Count(buf.String(), "event: ping\n")
		want := 1
		if !thinking {
			want += pieces * 512 / HiddenThinkingPingBytes
		}
		if pings != want {
			t.Errorf("thinking %v: %d pings for %d bytes of reasoning, want %d", thinking, pings, pieces*512, want)
		}
	}
}

// Hidden reasoning before the stream started writes nothing: the caller
// can still answer with an HTTP error, and starts the stream itself.
func TestHiddenThinkingBeforeStartWritesNothing(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, false)
	piece := `{"choices":[{"index":0,"delta":{"reasoning":"` + strings.Repeat("x", 2*HiddenThinkingPingBytes) + `"}}]}`
	if err := s.Chunk([]byte(piece)); err != nil {
		t.Fatal(err)
	}
	if s.Started() || buf.Len() != 0 {
		t.Fatalf("wrote %q before the stream started", buf.String())
	}
}
