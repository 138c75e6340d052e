package openaiapi

import (
	"strings"
	"testing"
)

// holdStep is one delta of a held stream: text (push) or reasoning
// (pushReasoning, as ChatStreamWriter.Add calls it while text is held).
type holdStep struct {
	text      string
	reasoning bool
}

// holdOut sums what a toolHolder has made ready to send, text and
// reasoning apart, and clears it (as drainHolder does).
func holdOut(h *toolHolder) (text, reasoning int) {
	for _, a := range h.ahead {
		text += len(a.text)
		reasoning += len(a.reasoning)
		if len(a.calls) > 0 {
			text += 1 << 40 // no call may come out of an unmarked run
		}
	}
	h.ahead = h.ahead[:0]
	t, calls := h.take()
	if len(calls) > 0 {
		text += 1 << 40
	}
	return text + len(t), reasoning
}

// The hold releases exactly when what it holds — text, leading
// whitespace, queued calls and the reasoning behind them, each counted
// once — first goes past MaxAnswerBytes: not a byte before, not a delta
// after. Reasoning behind a queued call is in the queue and in
// heldThought; counting it in both would release at about half the bound.
func TestHoldReleasesAtItsBoundNotBefore(t *testing.T) {
	call := `<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`
	open := `<tool_call>{"name":"lookup","arguments":{"q":"`
	// Sizes off the power of two so the crossing falls inside a delta.
	text := holdStep{text: strings.Repeat("a", 64<<10+7)}
	thought := holdStep{text: strings.Repeat("r", 64<<10-3), reasoning: true}
	for _, c := range []struct {
		name   string
		prefix []holdStep
		cycle  []holdStep
	}{
		{"reasoning behind an unmarked call", []holdStep{{text: call}}, []holdStep{thought}},
		{"reasoning and text behind an unmarked call", []holdStep{{text: "\n\n" + call}}, []holdStep{thought, text}},
		{"reasoning inside an open block", []holdStep{{text: open}}, []holdStep{thought, text}},
		{"reasoning inside a block that became a call", []holdStep{{text: open}, thought, {text: `"}}</tool_call>`}}, []holdStep{thought}},
		{"text behind an unmarked call", []holdStep{{text: " " + call}}, []holdStep{text}},
		{"exactly at the bound, then a byte", []holdStep{{text: call}, {text: strings.Repeat("r", MaxAnswerBytes-len(call)), reasoning: true}},
			[]holdStep{{text: "b"}}},
	} {
		h := newToolHolder(offered)
		pushed := 0
		// step pushes s and reports whether the hold has been released.
		step := func(s holdStep) bool {
			if s.reasoning {
				if !h.holdsText() {
					t.Fatalf("%s: reasoning with nothing held (%d bytes pushed)", c.name, pushed)
				}
				h.pushReasoning(s.text)
			} else {
				h.push(s.text)
			}
			pushed += len(s.text)
			outText, outThought := holdOut(h)
			if pushed <= MaxAnswerBytes {
				if outText != 0 || outThought != 0 || !h.holdsText() {
					t.Fatalf("%s: released %d bytes of text and %d of reasoning with %d held, under the %d-byte bound",
						c.name, outText, outThought, pushed, MaxAnswerBytes)
				}
				return false
			}
			if outText+outThought != pushed || h.holdsText() || h.heldThought != 0 || h.queued != 0 {
				t.Fatalf("%s: past the bound (%d bytes): released %d+%d, still held: text %v, reasoning %d, queued %d",
					c.name, pushed, outText, outThought, h.holdsText(), h.heldThought, h.queued)
			}
			return true
		}
		for _, s := range c.prefix {
			if step(s) {
				t.Fatalf("%s: released within the prefix", c.name)
			}
		}
		for i := 0; !step(c.cycle[i%len(c.cycle)]); i++ {
		}
	}
}

// Once the mark releases what was queued for it, that no longer counts
// toward the bound: a block opened afterwards is held up to the whole
// MaxAnswerBytes again.
func TestHoldCountsNothingReleasedByTheMark(t *testing.T) {
	h := newToolHolder(offered)
	h.push(`<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`)
	h.push(strings.Repeat("a", MaxAnswerBytes/2))
	h.pushReasoning(strings.Repeat("r", MaxAnswerBytes/4))
	h.mark()
	if _, reasoning := holdOut(h); reasoning != MaxAnswerBytes/4 || h.holdsText() || h.queued != 0 || h.heldThought != 0 {
		t.Fatalf("the mark left held: text %v, queued %d, reasoning %d (released %d)", h.holdsText(), h.queued, h.heldThought, reasoning)
	}
	open := `<tool_call>{"name":"lookup","arguments":{"q":"`
	h.push(open)
	h.push(strings.Repeat("b", MaxAnswerBytes-len(open)))
	if text, reasoning := holdOut(h); text != 0 || reasoning != 0 || !h.holdsText() {
		t.Fatalf("a block of %d bytes opened after the mark was released (%d bytes)", MaxAnswerBytes, text+reasoning)
	}
	h.push("b")
	if text, _ := holdOut(h); text != MaxAnswerBytes+1 || h.holdsText() {
		t.Fatalf("past the bound: released %d of %d bytes", text, MaxAnswerBytes+1)
	}
}
