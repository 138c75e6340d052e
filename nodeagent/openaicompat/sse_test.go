package openaicompat

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// refBoundaries lists, with the whole input known, every offset just past a
// blank line (the end of an SSE event). It is written independently of the
// incremental splitter so the fuzz target can compare the two.
func refBoundaries(in []byte) map[int]bool {
	out := map[int]bool{}
	lineStart := true
	for i := 0; i < len(in); {
		var next int
		switch {
		case in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n':
			next = i + 2
		case in[i] == '\r' || in[i] == '\n':
			next = i + 1
		default:
			lineStart = false
			i++
			continue
		}
		if lineStart {
			out[next] = true
		}
		lineStart = true
		i = next
	}
	return out
}

// splitBySizes cuts in into pieces whose sizes come from sizes (cycled).
func splitBySizes(in, sizes []byte) [][]byte {
	var out [][]byte
	for k := 0; len(in) > 0; k++ {
		n := len(in)
		if len(sizes) > 0 {
			n = min(int(sizes[k%len(sizes)])%17+1, len(in))
		}
		out = append(out, in[:n])
		in = in[n:]
	}
	return out
}

// checkSplitter feeds pieces and checks the splitter's contract against the
// reference: nothing altered, splits only at event ends, and no complete
// event held back once its blank line has arrived.
func checkSplitter(t *testing.T, input []byte, pieces [][]byte) {
	t.Helper()
	bounds := refBoundaries(input)
	sp := newSSESplitter(maxSSEEvent)
	var got []byte
	pushed := 0
	for _, piece := range pieces {
		// The splitter gets a copy that is scribbled over once its output
		// is taken: it must not keep the caller's bytes.
		p := bytes.Clone(piece)
		out := sp.push(p)
		pushed += len(p)
		if len(out) > 0 {
			got = append(got, out...)
			if !bounds[len(got)] {
				t.Fatalf("split at %d is not an event boundary (input %q)", len(got), input)
			}
		}
		for i := range p {
			p[i] = '#'
		}
		for b := range bounds {
			// A boundary after a trailing CR is undecided until the next
			// byte shows whether it was CRLF.
			if b > len(got) && b <= pushed && (b != pushed || input[b-1] != '\r') {
				t.Fatalf("complete event ending at %d held back (emitted %d of %d pushed, input %q)", b, len(got), pushed, input)
			}
		}
		if sp.pending() != pushed-len(got) {
			t.Fatalf("pending %d, want %d", sp.pending(), pushed-len(got))
		}
	}
	got = append(got, sp.flush()...)
	if !bytes.Equal(got, input) {
		t.Fatalf("bytes altered:\n got %q\nwant %q", got, input)
	}
}

func TestSSESplitterBoundaries(t *testing.T) {
	cases := []string{
		"data: a\n\ndata: b\n\n",
		"data: a\r\n\r\ndata: b\r\n\r\n",
		"data: a\r\rdata: b\r\r",
		"data: a\n\r\nid: 1\r\n\ndata: b",
		"event: x\ndata: 1\ndata: 2\n\n: comment\n\n",
		"\n\n\ndata: lead\n\n",
		strings.Repeat("data: {\"x\":1}\n\n", 50),
	}
	for _, c := range cases {
		for _, sizes := range [][]byte{nil, {0}, {1}, {2, 5}, {7, 3, 11}} {
			checkSplitter(t, []byte(c), splitBySizes([]byte(c), sizes))
		}
	}
}

func TestSSESplitterEmitsSeveralEventsAtOnce(t *testing.T) {
	sp := newSSESplitter(maxSSEEvent)
	out := sp.push([]byte("data: 1\n\ndata: 2\n\ndata: 3"))
	if string(out) != "data: 1\n\ndata: 2\n\n" {
		t.Fatalf("got %q", out)
	}
	if out := sp.push([]byte("\n\n")); string(out) != "data: 3\n\n" {
		t.Fatalf("got %q", out)
	}
}

// TestSSESplitterHoldsNothingForWholeEvents: reads that end on event
// boundaries (a paced upstream's) are handed back in place, so a held
// stream keeps no buffer; a partial event is copied, then released whole.
func TestSSESplitterHoldsNothingForWholeEvents(t *testing.T) {
	sp := newSSESplitter(maxSSEEvent)
	for range 3 {
		p := []byte("data: {\"x\":1}\n\n")
		if out := sp.push(p); len(out) != len(p) || &out[0] != &p[0] {
			t.Fatalf("whole event not returned in place: %q", out)
		}
	}
	if cap(sp.buf) != 0 {
		t.Fatalf("splitter holds %d bytes of buffer for whole events", cap(sp.buf))
	}
	p := []byte("data: 1\n\ndata: 2")
	if out := sp.push(p); string(out) != "data: 1\n\n" {
		t.Fatalf("got %q", out)
	}
	clear(p)
	if out := sp.push([]byte("\n\n")); string(out) != "data: 2\n\n" {
		t.Fatalf("partial event not kept apart from the caller's bytes: %q", out)
	}
}

func TestSSESplitterBoundsOversizedEvent(t *testing.T) {
	sp := newSSESplitter(16)
	if out := sp.push([]byte("data: 0123456")); out != nil {
		t.Fatalf("emitted early: %q", out)
	}
	out := sp.push([]byte("789abcdef"))
	if string(out) != "data: 0123456789abcdef" || sp.pending() != 0 {
		t.Fatalf("oversized event not released: %q (pending %d)", out, sp.pending())
	}
	// A CR released by the bound was a terminator; the LF after it is its
	// second half, not a blank line.
	sp = newSSESplitter(8)
	if out := sp.push([]byte("data: 12\r")); string(out) != "data: 12\r" {
		t.Fatalf("got %q", out)
	}
	if out := sp.push([]byte("\nx\n")); out != nil {
		t.Fatalf("split inside an event: %q", out)
	}
	if out := sp.push([]byte("\n")); string(out) != "\nx\n\n" {
		t.Fatalf("got %q", out)
	}
}

func TestEventData(t *testing.T) {
	cases := map[string]string{
		"data: {\"a\":1}\n\n":             `{"a":1}`,
		"data:{\"a\":1}\r\n\r\n":          `{"a":1}`,
		"event: x\ndata: a\ndata:  b\n\n": "a\n b",
		"id: 3\ndata\n\n":                 "",
	}
	for in, want := range cases {
		got, ok := eventData([]byte(in))
		if !ok || string(got) != want {
			t.Errorf("%q: got %q %v", in, got, ok)
		}
	}
	if _, ok := eventData([]byte(": keep-alive\n\n")); ok {
		t.Error("comment has no data")
	}
	var seen []string
	_ = forEachEvent([]byte("data: 1\n\n: c\n\ndata: 2\r\n\r\ndata: 3\r\r"), func(d []byte) error {
		seen = append(seen, string(d))
		return nil
	})
	if !reflect.DeepEqual(seen, []string{"1", "2", "3"}) {
		t.Errorf("events %q", seen)
	}
}

func TestIndexLineEnd(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, in := range []string{
		"", "x", "\n", "\r", "\r\n", "\n\r", "ab\ncd\re", "ab\rcd\ne",
		long, long + "\n", long + "\r", "\n" + long, long + "\r" + long + "\n", long + "\n" + long + "\r",
	} {
		if got, want := indexLineEnd([]byte(in)), bytes.IndexAny([]byte(in), "\r\n"); got != want {
			t.Errorf("indexLineEnd(%.20q…) = %d, want %d", in, got, want)
		}
	}
}

// FuzzSSESplitter checks the splitter against refBoundaries for arbitrary
// input cut into arbitrary pieces, and that a small bound never alters
// bytes nor lets the buffer grow past bound + one piece.
func FuzzSSESplitter(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: b\n\n"), []byte{3})
	f.Add([]byte("data: a\r\n\r\ndata: b\r\n\r\n"), []byte{1, 2})
	f.Add([]byte("data: a\r\rdata: b\r"), []byte{0})
	f.Fuzz(func(t *testing.T, input, sizes []byte) {
		for i := 0; i <= len(input); { // from each line's start, as the splitter scans
			got, want := indexLineEnd(input[i:]), bytes.IndexAny(input[i:], "\r\n")
			if got != want {
				t.Fatalf("indexLineEnd(%q) = %d, bytes.IndexAny gives %d", input[i:], got, want)
			}
			if got < 0 {
				break
			}
			i += got + 1
		}
		pieces := splitBySizes(input, sizes)
		checkSplitter(t, input, pieces)

		sp := newSSESplitter(8)
		var got []byte
		for _, p := range pieces {
			got = append(got, sp.push(p)...)
			if sp.pending() > 8+len(p) {
				t.Fatalf("pending %d exceeds bound", sp.pending())
			}
		}
		got = append(got, sp.flush()...)
		if !bytes.Equal(got, input) {
			t.Fatalf("bounded splitter altered bytes:\n got %q\nwant %q", got, input)
		}
	})
}
