package openaiapi

import "testing"

// TestHoldBoundsItsPieces40b: what the holder keeps apart (reasoning
// within held text, segments queued behind an unmarked call) costs some
// fifty bytes a piece besides its text, and MaxAnswerBytes counts only
// the text: a node streaming one-byte deltas made it hold some forty
// times that bound (1 MiB of one-byte reasoning held 24 to 33 MiB).
// Past maxHeldPieces pieces everything held is released, verbatim and in
// order, as at MaxAnswerBytes.
func TestHoldBoundsItsPieces40b(t *testing.T) {
	for _, c := range []struct {
		name, prefix string
		reasoning    bool
	}{
		{"reasoning within a partial tag", "<tool_cal", true},
		{"reasoning behind an unmarked call", `<tool_call>{"name":"lookup","arguments":{}}</tool_call>`, true},
		{"text behind an unmarked call", `<tool_call>{"name":"lookup","arguments":{}}</tool_call>`, false},
	} {
		h := newToolHolder(offered)
		h.push(c.prefix)
		pushed, released := len(c.prefix), 0
		for i := range maxHeldPieces + 2 {
			if c.reasoning {
				h.pushReasoning(string(rune('a' + i%26)))
			} else {
				h.push(string(rune('a' + i%26)))
			}
			pushed++
			text, reasoning := holdOut(h)
			released += text + reasoning
			if n := len(h.scan.marks) + len(h.queue); n > maxHeldPieces {
				t.Fatalf("%s: %d pieces held", c.name, n)
			}
		}
		if released == 0 || len(h.scan.marks)+len(h.queue) > 2 {
			t.Fatalf("%s: released %d of %d bytes; still held: %d marks, %d queued", c.name, released, pushed, len(h.scan.marks), len(h.queue))
		}
		// Nothing lost: the end releases the rest, and every byte came out.
		h.finish(false)
		text, reasoning := holdOut(h)
		if released += text + reasoning; released != pushed {
			t.Fatalf("%s: %d bytes came out of %d pushed", c.name, released, pushed)
		}
	}
}
