package gateway

import (
	"bytes"
	"testing"
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

// BenchmarkHasSSEDone looks for the end marker in a typical vLLM chunk (it
// is not there), against bytes.Contains on the same chunk.
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
