package cli

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUTF8ChunkerNeverSplitsSequences(t *testing.T) {
	const text = "aé€𝄞b"
	b := []byte(text)
	// Every way of cutting the bytes into two or three chunks.
	for i := 0; i <= len(b); i++ {
		for j := i; j <= len(b); j++ {
			var c utf8Chunker
			var out []string
			for _, chunk := range [][]byte{b[:i], b[i:j], b[j:]} {
				out = append(out, c.next(chunk))
			}
			out = append(out, c.flush())
			for _, s := range out {
				if !utf8.ValidString(s) {
					t.Fatalf("cut %d,%d: piece %q is not valid UTF-8", i, j, s)
				}
			}
			if got := strings.Join(out, ""); got != text {
				t.Fatalf("cut %d,%d: %q, want %q", i, j, got, text)
			}
		}
	}
}

func TestUTF8ChunkerReplacesInvalidBytes(t *testing.T) {
	var c utf8Chunker
	got := c.next([]byte("a\xffb\xe2")) + c.next([]byte("x")) + c.flush()
	if got != "a\uFFFDb\uFFFDx" {
		t.Fatalf("got %q", got)
	}
	c = utf8Chunker{}
	if got := c.next([]byte("z\xe2\x82")) + c.flush(); got != "z\uFFFD" {
		t.Fatalf("truncated sequence at EOF: %q", got)
	}
}

func TestTailBuffer(t *testing.T) {
	tb := newTailBuffer(5)
	for _, s := range []string{"ab", "cd", "efg", "h"} {
		tb.Write([]byte(s))
	}
	if got := string(tb.bytes()); got != "defgh" {
		t.Fatalf("tail = %q", got)
	}
	tb.Write([]byte("0123456789"))
	if got := string(tb.bytes()); got != "56789" {
		t.Fatalf("tail = %q", got)
	}
	// A cut inside "é" drops the orphaned continuation byte.
	tb = newTailBuffer(4)
	tb.Write([]byte("xxé  ab"))
	if got := tb.text(); got != "ab" {
		t.Fatalf("text = %q", got)
	}
	// A cut just before "é" keeps it whole.
	tb = newTailBuffer(5)
	tb.Write([]byte("xé ab"))
	if got := tb.text(); got != "é ab" {
		t.Fatalf("text = %q", got)
	}
}

// tailBuffer against the obvious model (keep everything, look at the end)
// for random write sizes around its limit.
func TestTailBufferModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{1, 7, 64} {
		tb := newTailBuffer(limit)
		var all []byte
		for i := range 2000 {
			p := make([]byte, rng.IntN(2*limit+2))
			for j := range p {
				p[j] = byte(i + j)
			}
			tb.Write(p)
			all = append(all, p...)
			want := all[max(len(all)-limit, 0):]
			if got := tb.bytes(); string(got) != string(want) {
				t.Fatalf("limit %d, write %d: tail %q, want %q", limit, i, got, want)
			}
			if len(tb.buf) > 2*limit || tb.total != int64(len(all)) {
				t.Fatalf("limit %d: holds %d bytes, total %d", limit, len(tb.buf), tb.total)
			}
		}
	}
}

// BenchmarkTailBufferSmallWrites keeps the 64 KiB capture window of output
// streamed in 40-byte pieces.
func BenchmarkTailBufferSmallWrites(b *testing.B) {
	tb := newTailBuffer(captureWindow)
	p := []byte(strings.Repeat("t", 40))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		tb.Write(p)
	}
}

func TestCaptureFindsHeadOrTail(t *testing.T) {
	re := regexp.MustCompile(`session=(\S+)`)
	c := newCapture()
	c.Write([]byte("banner session=early\n"))
	c.Write([]byte(strings.Repeat("x", 3*captureWindow)))
	c.Write([]byte("\nsession=late1 session=late2\n"))
	if got := c.find(re); got != "early" {
		t.Fatalf("find = %q, want the head match", got)
	}

	c = newCapture()
	c.Write([]byte(strings.Repeat("x", 2*captureWindow)))
	c.Write([]byte("\nsession=late1 session=late2\n"))
	if got := c.find(re); got != "late2" {
		t.Fatalf("find = %q, want the last tail match", got)
	}

	c = newCapture()
	c.Write([]byte("session=\x01bad\n"))
	if got := c.find(regexp.MustCompile(`session=(.+)`)); got != "" {
		t.Fatalf("find = %q, want implausible ids refused", got)
	}
}

// FuzzChildOutput feeds hostile CLI output, cut into arbitrary chunks, to
// everything that decodes it: every delta is valid UTF-8 and, replacement
// characters aside, the text is the valid part of the output in order; the
// stderr tail is valid UTF-8 and bounded; a captured session id is one
// that can safely become an argv element.
func FuzzChildOutput(f *testing.F) {
	f.Add([]byte("aé€𝄞b\n"), []byte{1, 2, 3})
	f.Add([]byte("a\xffb\xe2\x82"), []byte{2})
	f.Add([]byte("session: --opt\nsession: abc-1\n"), []byte{5, 0, 7})
	f.Add([]byte("\xf0\x9f\x98\x80\xed\xa0\x80\xc0\xaf"), []byte{1, 1, 1, 1})
	re := regexp.MustCompile(`session: ?(\S*)`)
	f.Fuzz(func(t *testing.T, out, cuts []byte) {
		var (
			c    utf8Chunker
			text strings.Builder
			tail = newTailBuffer(7)
			capt = newCapture()
		)
		rest := out
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(int(cuts[i]), n)
			}
			chunk := rest[:n]
			rest = rest[n:]
			d := c.next(chunk)
			if !utf8.ValidString(d) {
				t.Fatalf("delta %q is not valid UTF-8", d)
			}
			if len(c.pending) >= utf8.UTFMax {
				t.Fatalf("holds back %d bytes", len(c.pending))
			}
			text.WriteString(d)
			tail.Write(chunk)
			capt.Write(chunk)
		}
		d := c.flush()
		if !utf8.ValidString(d) {
			t.Fatalf("flush %q is not valid UTF-8", d)
		}
		text.WriteString(d)
		strip := func(s string) string { return strings.ReplaceAll(s, "\uFFFD", "") }
		if got, want := strip(text.String()), strip(strings.ToValidUTF8(string(out), "")); got != want {
			t.Fatalf("text = %q, want %q", got, want)
		}
		if s := tail.text(); !utf8.ValidString(s) || len(tail.bytes()) > 7 {
			t.Fatalf("tail text %q, bytes %q", s, tail.bytes())
		}
		if id := capt.find(re); id != "" && id != plausibleID(id) {
			t.Fatalf("captured %q, which is not plausible", id)
		}
	})
}
