package openaiapi

import (
	"runtime"
	"strings"
	"testing"
)

// allocatedBy returns the bytes f allocates on the heap.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Holding back a long text tool call (a coding agent writing a file through
// a tool argument, token by token) or a long run of leading whitespace must
// cost memory in proportion to what is held, not to its square: each piece
// was once appended to a string by concatenation, copying all that was
// held before it (20,000 pieces of 8 bytes copied 1.6 GB).
func TestToolHolderHoldsInLinearMemory(t *testing.T) {
	const pieces, size = 20000, 8
	piece := strings.Repeat("a", size)
	held := uint64(pieces * size)
	for name, feed := range map[string]func(h *toolHolder){
		"open block": func(h *toolHolder) {
			h.push(`<tool_call>{"name":"lookup","arguments":{"content":"`)
			for range pieces {
				h.push(piece)
			}
			h.push(`"}}</tool_call>`)
		},
		"leading whitespace": func(h *toolHolder) {
			for range pieces * size / 2 {
				h.push("\n ")
			}
			h.push("x")
		},
	} {
		h := newToolHolder(offered)
		n := allocatedBy(func() { feed(h) })
		if n > 32*held {
			t.Errorf("%s: holding %d bytes allocated %d (%.0f×)", name, held, n, float64(n)/float64(held))
		}
		h.finish(true)
		text, calls := h.take()
		if name == "open block" && (len(calls) != 1 || len(calls[0].Function.Arguments) < int(held)) {
			t.Errorf("open block: %d calls, text %d bytes", len(calls), len(text))
		}
		if name == "leading whitespace" && len(text) != int(held)+1 {
			t.Errorf("leading whitespace: text %d bytes, want %d", len(text), held+1)
		}
	}
}

// BenchmarkChatStreamDeltaTools is BenchmarkChatStreamDelta for a chat that
// offered tools: each delta also goes through the text tool-call holder.
func BenchmarkChatStreamDeltaTools(b *testing.B) {
	benchChatStreamDelta(b, RenderOptions{Model: "qwen-7b", IncludeUsage: true, ToolNames: offered})
}

// BenchmarkToolHolderCall holds and restores one text tool call with a
// 4 KiB argument streamed in 8-byte pieces.
func BenchmarkToolHolderCall(b *testing.B) {
	arg := strings.Repeat("abcdefgh", 512)
	b.ReportAllocs()
	for b.Loop() {
		h := newToolHolder(offered)
		h.push(`<tool_call>{"name":"lookup","arguments":{"q":"`)
		for i := 0; i < len(arg); i += 8 {
			h.push(arg[i : i+8])
		}
		h.push(`"}}</tool_call>`)
		h.finish(true)
		if _, calls := h.take(); len(calls) != 1 {
			b.Fatal("no call")
		}
	}
}

// What a stream holds is bounded by MaxAnswerBytes: an opened block that
// never closes, whitespace that never ends, or calls of a run not (yet)
// marked as a text-fallback run are released as text once past it, in
// order, and holding starts afresh.
func TestToolHolderHeldIsBounded(t *testing.T) {
	piece := strings.Repeat("a", 64<<10)
	for name, c := range map[string]struct {
		open  string
		piece string
	}{
		"open block":     {`<tool_call>{"name":"lookup","arguments":{"q":"`, piece},
		"whitespace":     {"", strings.Repeat(" ", 64<<10)},
		"unmarked calls": {`<tool_call>{"name":"lookup","arguments":{}}</tool_call>`, piece},
	} {
		h := newToolHolder(offered)
		h.push(c.open)
		var out strings.Builder
		released := -1
		for i := 0; released < 0; i++ {
			if i*len(c.piece) > 2*MaxAnswerBytes {
				t.Fatalf("%s: nothing released after %d bytes", name, i*len(c.piece))
			}
			h.push(c.piece)
			text, calls := h.take()
			if len(calls) > 0 {
				t.Fatalf("%s: calls released from an unmarked run", name)
			}
			out.WriteString(text)
			if text != "" {
				released = (i + 1) * len(c.piece)
			}
		}
		if held := released + len(c.open) - out.Len(); held != 0 || released > MaxAnswerBytes+len(c.piece) {
			t.Errorf("%s: released %d bytes after %d were pushed (%d still held)", name, out.Len(), released+len(c.open), held)
		}
		if !strings.HasPrefix(out.String(), c.open) {
			t.Errorf("%s: released text does not start with what was held first", name)
		}
		// Holding starts afresh: a later call is still restored.
		h.push(`<tool_call>{"name":"lookup","arguments":{"q":1}}</tool_call>`)
		h.finish(true)
		if _, calls := h.take(); len(calls) != 1 {
			t.Errorf("%s: %d calls after the release, want 1", name, len(calls))
		}
	}
}
