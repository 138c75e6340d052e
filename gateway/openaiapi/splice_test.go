package openaiapi

import (
	"io"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// checkTextSplice renders one text chunk both ways, for the chat and the
// completion writers, and fails when the splice differs from the
// marshalled chunk.
func checkTextSplice(t *testing.T, id, model string, created int64, usage bool, text string) {
	t.Helper()
	opts := RenderOptions{ID: id, Model: model, Created: created, IncludeUsage: usage}
	if created == 0 {
		opts.Created = 1 // 0 means now
	}

	chat := NewChatStreamWriter(nil, nil, opts)
	mark := spliceMark
	chat.content = newTextSplice(chat.encodeChunk(chunkDelta{Content: &mark}, nil))
	chat.sse.textEvent(&chat.content, text)
	got := string(chat.sse.buf)
	chat.sse.buf = chat.sse.buf[:0]
	chat.sse.event(chat.encodeChunk(chunkDelta{Content: &text}, nil))
	if want := string(chat.sse.buf); got != want {
		t.Fatalf("chat splice:\n got %q\nwant %q", got, want)
	}

	chat.sse.buf = chat.sse.buf[:0]
	chat.reasoning = newTextSplice(chat.encodeChunk(chunkDelta{Reasoning: &mark}, nil))
	chat.sse.textEvent(&chat.reasoning, text)
	got = string(chat.sse.buf)
	chat.sse.buf = chat.sse.buf[:0]
	chat.sse.event(chat.encodeChunk(chunkDelta{Reasoning: &text}, nil))
	if want := string(chat.sse.buf); got != want {
		t.Fatalf("chat reasoning splice:\n got %q\nwant %q", got, want)
	}

	cmpl := NewCompletionStreamWriter(nil, nil, opts)
	cmpl.text = newTextSplice(cmpl.encodeChunk(spliceMark, nil))
	cmpl.sse.textEvent(&cmpl.text, text)
	got = string(cmpl.sse.buf)
	cmpl.sse.buf = cmpl.sse.buf[:0]
	cmpl.sse.event(cmpl.encodeChunk(text, nil))
	if want := string(cmpl.sse.buf); got != want {
		t.Fatalf("completion splice:\n got %q\nwant %q", got, want)
	}
}

var textSpliceSeeds = []struct {
	id, model string
	usage     bool
	text      string
}{
	{"chatcmpl-1", "llama3", false, "Hello"},
	{"chatcmpl-1", "llama3", true, "\"quoted\"\n<tool_call>"},
	// The mark's own encoding in the id and the model: the splice must
	// find the text's, after them.
	{"\x00", "\"\x00\"", true, "\x00"},
	{"x\"\\u0000\"", "m\x00", false, ""},
	{"", "", false, "a\u2028b\xff"},
}

func TestTextSpliceMatchesMarshal(t *testing.T) {
	for _, c := range textSpliceSeeds {
		checkTextSplice(t, c.id, c.model, 1733300000, c.usage, c.text)
	}
}

// FuzzTextSplice holds the spliced text chunk to the marshalled one for any
// id, model and text.
func FuzzTextSplice(f *testing.F) {
	for _, c := range textSpliceSeeds {
		f.Add(c.id, c.model, int64(1733300000), c.usage, c.text)
	}
	f.Fuzz(func(t *testing.T, id, model string, created int64, usage bool, text string) {
		checkTextSplice(t, id, model, created, usage, text)
	})
}

// TestStreamTextAllocatesNothing: once a stream's first text chunk is out,
// a text delta is rendered and written with no allocation (it was five:
// the text's escape, the choices, the boxed chunk, the encoder, its buffer).
func TestStreamTextAllocatesNothing(t *testing.T) {
	chat := NewChatStreamWriter(io.Discard, nil, RenderOptions{Model: "m", IncludeUsage: true})
	cmpl := NewCompletionStreamWriter(io.Discard, nil, RenderOptions{Model: "m"})
	ev := evDelta("some streamed \"text\"\n")
	for _, w := range []interface{ Add(*iop.RunEvent) error }{chat, cmpl} {
		if err := w.Add(ev); err != nil { // the role chunk, the splice
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() {
			if err := w.Add(ev); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%T: a text delta allocated %.1f times", w, n)
		}
	}
}
