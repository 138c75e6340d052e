package anthropicapi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A held call costs the hold its name and arguments and 64 bytes besides
// (its map entry and struct): calls with one-byte names and no arguments,
// 65 bytes each, pass the 1 MiB bound at the 16,132nd. Counted by their
// names alone, a million of them would be held.
func TestHeldToolCallCostsItsEntry37m(t *testing.T) {
	s, _, _ := newTestStream(nil)
	feed(t, s, toolFragment("0", "f", `"{"`))
	const calls = (1<<20)/65 + 1 // 16,132
	var err error
	for i := 1; i <= calls && err == nil; i += 1000 {
		err = s.Chunk([]byte(manyCalls(i, min(i+1000, calls+1))))
	}
	if !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("%d held calls of one-byte names: %v, want the hold's bound", calls, err)
	}
}

// Held calls and held reasoning share the one bound: reasoning that comes
// when held calls fill it is not held beside them (the open call's block
// closes, the held calls are written, and the reasoning streams as a
// thinking block), so the stream never holds more than
// MaxHeldThinkingBytes.
func TestHeldReasoningSharesTheBoundWithHeldCalls37m(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, true)
	args := MaxHeldThinkingBytes - heldToolCost - 1 - 10
	feed(t, s,
		toolFragment("0", "f", `"{"`),
		toolFragment("1", "g", `"`+strings.Repeat("x", args)+`"`),
		`{"choices":[{"index":0,"delta":{"reasoning":"`+strings.Repeat("r", 100)+`"}}]}`)
	if held := s.heldBytes(); held > MaxHeldThinkingBytes {
		t.Errorf("holding %d bytes, past the bound of %d", held, MaxHeldThinkingBytes)
	}
	if s.open != openThinking {
		t.Errorf("open block %d, want the reasoning's thinking block", s.open)
	}
}
