package openaiapi

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// streamOrder decodes a chat stream into what its chunks carried, in
// order, adjacent pieces of one kind joined: "c:<content>", "r:<reasoning>"
// or "t:<tool name>".
func streamOrder(t *testing.T, raw string) []string {
	t.Helper()
	var out []string
	add := func(kind, s string) {
		if n := len(out); n > 0 && kind != "t:" && strings.HasPrefix(out[n-1], kind) {
			out[n-1] += s
			return
		}
		out = append(out, kind+s)
	}
	for _, d := range sseData(t, raw) {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string         `json:"content"`
					Reasoning *string         `json:"reasoning"`
					ToolCalls []chunkToolCall `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, ch := range c.Choices {
			if r := ch.Delta.Reasoning; r != nil {
				add("r:", *r)
			}
			if s := ch.Delta.Content; s != nil && *s != "" {
				add("c:", *s)
			}
			for _, tc := range ch.Delta.ToolCalls {
				add("t:", tc.Function.Name)
			}
		}
	}
	return out
}

// Text the model produced before a reasoning piece is held when it might
// be a text tool call; the reasoning used to be written at once, ahead of
// it. It now waits behind that text, so the client sees text, calls and
// reasoning in the order the model produced them.
func TestReasoningWaitsBehindHeldText(t *testing.T) {
	call := `<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`
	for _, c := range []struct {
		name string
		opts RenderOptions
		evs  []*iop.RunEvent
		want []string
	}{
		{"partial tag, then plain text", RenderOptions{Model: "m", ToolNames: offered},
			[]*iop.RunEvent{evStart(nil), evDelta("Hello <to"), evReasoning("think"), evDelta("ol is here"), evComplete("stop", nil, nil)},
			[]string{"c:Hello <to", "r:think", "c:ol is here"}},
		{"reasoning inside a block of a marked run", RenderOptions{Model: "m", ToolNames: offered},
			[]*iop.RunEvent{evStart(fallbackMeta), evDelta(call[:20]), evReasoning("mid"), evDelta(call[20:]), evReasoning("after"), evDelta("done"), evComplete("stop", nil, nil)},
			[]string{"t:lookup", "r:midafter", "c:done"}},
		{"reasoning after a call held for the mark", RenderOptions{Model: "m", ToolNames: offered},
			[]*iop.RunEvent{evStart(nil), evDelta("Let me look. " + call), evReasoning("then"), evDelta(" ok"), evComplete("stop", nil, fallbackMeta)},
			[]string{"c:Let me look. ", "t:lookup", "r:then", "c: ok"}},
		{"unmarked run releases all verbatim, in order", RenderOptions{Model: "m", ToolNames: offered},
			[]*iop.RunEvent{evStart(nil), evDelta(call), evReasoning("r1"), evDelta("<tool"), evReasoning("r2"), evComplete("stop", nil, nil)},
			[]string{"c:" + call, "r:r1", "c:<tool", "r:r2"}},
		{"held leading whitespace is overtaken", RenderOptions{Model: "m", ToolNames: offered},
			[]*iop.RunEvent{evStart(nil), evDelta("\n\n"), evReasoning("think"), evDelta("Answer"), evComplete("stop", nil, nil)},
			[]string{"r:think", "c:\n\nAnswer"}},
		{"no tools offered: nothing is held", RenderOptions{Model: "m"},
			[]*iop.RunEvent{evStart(nil), evDelta("Hello <to"), evReasoning("think"), evDelta("ol"), evComplete("stop", nil, nil)},
			[]string{"c:Hello <to", "r:think", "c:ol"}},
	} {
		raw, w, err := runStream(t, c.opts, c.evs...)
		if err != nil || w.Failure() != nil {
			t.Fatalf("%s: %v %v", c.name, err, w.Failure())
		}
		if got := streamOrder(t, raw); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Reasoning held behind text counts toward the hold's bound: past
// MaxAnswerBytes everything held goes out, verbatim and in order, instead
// of growing without end behind an unclosed block.
func TestReasoningHeldBehindTextIsBounded(t *testing.T) {
	var buf strings.Builder
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m", ToolNames: offered})
	piece := strings.Repeat("r", 64<<10)
	for _, ev := range []*iop.RunEvent{evStart(nil), evDelta(`<tool_call>{"name":"lookup","arguments":{"q":"`)} {
		if err := w.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	sent := 0
	for range MaxAnswerBytes/len(piece) + 1 {
		if err := w.Add(evReasoning(piece)); err != nil {
			t.Fatal(err)
		}
		sent += len(piece)
	}
	got := streamOrder(t, buf.String())
	if len(got) != 2 || !strings.HasPrefix(got[0], "c:<tool_call>") || len(got[1]) != len("r:")+sent {
		t.Fatalf("after %d bytes of reasoning behind an open block: %d pieces %.60q", sent, len(got), got)
	}
	if w.holder.holdsText() || w.holder.heldThought != 0 {
		t.Errorf("still held: text %v, reasoning %d bytes", w.holder.holdsText(), w.holder.heldThought)
	}
}

// Reasoning interleaved anywhere in a tool-offering chat's content changes
// neither the content nor the calls the stream renders (they equal the
// non-stream rendering's), and all of it goes out, once, in its order.
func FuzzReasoningAmongHeldText(f *testing.F) {
	for _, c := range streamSamples {
		f.Add(c, uint8(3), uint8(0))
		f.Add(c, uint8(11), uint8(1))
	}
	f.Add(`Hi <tool_call>{"name":"lookup","arguments":{}}</tool_call> ok`, uint8(5), uint8(2))
	f.Fuzz(func(t *testing.T, content string, step, markAt uint8) {
		if content == "" || !utf8.ValidString(content) || len(content) > 4096 {
			return
		}
		n := int(step%16) + 1
		var pieces []string
		for rest := content; rest != ""; {
			k := min(n, len(rest))
			for k < len(rest) && !utf8.RuneStart(rest[k]) {
				k++
			}
			pieces = append(pieces, rest[:k])
			rest = rest[k:]
		}
		mark := []string{"start", "complete", "none"}[markAt%3]
		opts := RenderOptions{Model: "m", ToolNames: offered}
		plain := streamEvents(pieces, mark)
		want := renderNonStream(t, opts, plain)
		var evs []*iop.RunEvent
		var thoughts strings.Builder
		for i, ev := range plain {
			evs = append(evs, ev)
			if i < len(plain)-1 {
				r := "r" + strconv.Itoa(i) + ";"
				thoughts.WriteString(r)
				evs = append(evs, evReasoning(r))
			}
		}
		if got := renderStream(t, opts, evs); !equalRendered(got, want) {
			t.Fatalf("%q by %d, mark %s:\n stream %+v\n   want %+v", content, n, mark, got, want)
		}
		raw, _, _ := runStream(t, opts, evs...)
		var sent strings.Builder
		for _, p := range streamOrder(t, raw) {
			if r, ok := strings.CutPrefix(p, "r:"); ok {
				sent.WriteString(r)
			}
		}
		if sent.String() != thoughts.String() {
			t.Fatalf("%q by %d: reasoning sent %q, want %q", content, n, sent.String(), thoughts.String())
		}
	})
}
