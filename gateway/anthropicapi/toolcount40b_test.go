package anthropicapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// toolChunk40b is a chunk starting tool call index with arguments args.
func toolChunk40b(index int, args string) []byte {
	return fmt.Appendf(nil, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"c%d","function":{"name":"f","arguments":%q}}]}}]}`, index, index, args)
}

// TestStreamToolCallsBounded40b: the writer remembers every tool call
// index it started for the stream's life, so an upstream that keeps
// starting calls (one after another, or interleaved and held) used to
// grow that set without bound. Past maxToolCalls, as many as the node's
// adapters allow a run, the stream fails as malformed; up to it, every
// call is translated.
func TestStreamToolCallsBounded40b(t *testing.T) {
	for _, c := range []struct {
		name  string
		first string // the first call's arguments: whole, or open (later calls held)
	}{
		{"one after another", "{}"},
		{"interleaved, held behind an open call", "{"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			s := NewStreamWriter(&out, nil, "m", 1, nil, false)
			for i := range maxToolCalls {
				args := "{}"
				if i == 0 {
					args = c.first
				}
				if err := s.Chunk(toolChunk40b(i, args)); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			err := s.Chunk(toolChunk40b(maxToolCalls, "{}"))
			if !errors.Is(err, ErrMalformedUpstream) {
				t.Fatalf("call %d: %v, want a malformed upstream", maxToolCalls, err)
			}
			if len(s.toolsSeen) > maxToolCalls {
				t.Fatalf("%d calls remembered", len(s.toolsSeen))
			}
		})
	}
	t.Run("up to the bound", func(t *testing.T) {
		var out bytes.Buffer
		s := NewStreamWriter(&out, nil, "m", 1, nil, false)
		for i := range maxToolCalls {
			if err := s.Chunk(toolChunk40b(i, "{}")); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
		checkEvents(t, out.Bytes())
		if n := strings.Count(out.String(), `"type":"tool_use"`); n != maxToolCalls || s.StopReason() != "tool_use" {
			t.Fatalf("%d tool_use blocks, stop reason %q", n, s.StopReason())
		}
	})
	t.Run("a whole answer", func(t *testing.T) {
		var calls []string
		for i := range maxToolCalls + 1 {
			calls = append(calls, fmt.Sprintf(`{"id":"c%d","function":{"name":"f","arguments":"{}"}}`, i))
		}
		body := `{"choices":[{"index":0,"message":{"tool_calls":[` + strings.Join(calls, ",") + `]},"finish_reason":"tool_calls"}]}`
		s := NewStreamWriter(io.Discard, nil, "m", 1, nil, false)
		if err := s.Whole([]byte(body)); !errors.Is(err, ErrMalformedUpstream) {
			t.Fatalf("%d calls: %v, want a malformed upstream", maxToolCalls+1, err)
		}
	})
}
