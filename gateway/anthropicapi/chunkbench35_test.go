package anthropicapi

import (
	"io"
	"testing"
)

// BenchmarkStreamChunk35 is one vLLM content chunk through a stream
// writer (the per-event cost a streamed Messages answer pays), model
// member included.
func BenchmarkStreamChunk35(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-5a1f3b2c9e8d4f7a","object":"chat.completion.chunk","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`)
	sw := NewStreamWriter(io.Discard, nil, "qwen-7b", 12, nil, false)
	b.ReportAllocs()
	for b.Loop() {
		if err := sw.Chunk(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
