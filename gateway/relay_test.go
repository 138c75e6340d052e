package gateway

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// hasSSEDone is bytes.Contains(b, sseDone): at either end, split, repeated
// and next to look-alikes.
func TestHasSSEDone(t *testing.T) {
	for _, b := range []string{
		"", "DONE]", "[DONE]", "data: [DONE]", "data: [DONE]\n\n", "xdata: [DONE]", "data: [DONE",
		"data:[DONE]", "data: [DONE]data: [DONE]", "DONE]data: [DONE]", "data: [data: [DONE]",
		`data: {"choices":[{"delta":{"content":"DONE]"}}]}` + "\n\n",
		`data: {"choices":[]}` + "\n\ndata: [DONE]\n\n", "ata: [DONE]", "data: [DONE]]",
	} {
		if got, want := hasSSEDone([]byte(b)), bytes.Contains([]byte(b), sseDone); got != want {
			t.Errorf("hasSSEDone(%q) = %v, want %v", b, got, want)
		}
	}
}

func FuzzHasSSEDone(f *testing.F) {
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte(`data: {"x":"DONE]"}` + "\n\ndata: [DONE]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := hasSSEDone(b), bytes.Contains(b, sseDone); got != want {
			t.Fatalf("hasSSEDone(%q) = %v, bytes.Contains says %v", b, got, want)
		}
	})
}

// doneScan, fed a stream in pieces cut anywhere, reports for each piece
// whether an sseDone ends in it: found in the piece with the
// len(sseDone)-1 bytes before it.
func FuzzDoneScan(f *testing.F) {
	f.Add([]byte("data: {}\n\ndata: [DONE]\n\n"), []byte{3, 14, 1, 1, 40})
	f.Add([]byte("data: [DOdata: [DONE]"), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		var d doneScan
		at := 0
		for i := 0; at < len(stream); i++ {
			n := len(stream) - at
			if i < len(cuts) {
				n = min(n, int(cuts[i]))
			}
			piece := stream[at : at+n]
			want := bytes.Contains(stream[max(at-(len(sseDone)-1), 0):at+n], sseDone)
			if got := d.seen(piece); got != want {
				t.Fatalf("piece %d %q after %q: seen %v, want %v", i, piece, stream[:at], got, want)
			}
			at += n
		}
	})
}

// BenchmarkHasSSEDone looks for the end marker in a typical vLLM chunk (it
// is not there), against bytes.Contains on the same chunk, and as the
// relay does, across the chunk's boundary too (doneScan).
func BenchmarkHasSSEDone(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion.chunk",` +
		`"created":1735689600,"model":"bench-model","choices":[{"index":0,"delta":{"content":" tokens"},` +
		`"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for _, c := range []struct {
		name string
		f    func([]byte) bool
	}{
		{"bytes.Contains", func(b []byte) bool { return bytes.Contains(b, sseDone) }},
		{"hasSSEDone", hasSSEDone},
		{"doneScan", (&doneScan{}).seen},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.f(chunk) {
					b.Fatal("no marker in the chunk, but found one")
				}
			}
		})
	}
}

// A writer that cannot take a write deadline (a wrapper without Unwrap)
// fails the write rather than writing with no bound: the miss would
// otherwise show only as a lease a stalled client holds for ever.
func TestDeadlineWriterRefusesUnboundedWrites(t *testing.T) {
	rec := httptest.NewRecorder() // no SetWriteDeadline
	d := newDeadlineWriter(rec, time.Second)
	if _, err := d.Write([]byte("x")); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("Write: err = %v, want http.ErrNotSupported", err)
	}
	if err := d.Flush(); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("Flush: err = %v, want http.ErrNotSupported", err)
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("%d bytes written without a deadline", rec.Body.Len())
	}
}
