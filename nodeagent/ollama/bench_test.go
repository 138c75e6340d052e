package ollama

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkReadStream relays a 64-line /api/chat stream with its final
// statistics line: the node's per-line work for an Ollama run outside the
// wire.
func BenchmarkReadStream(b *testing.B) {
	var body []byte
	for i := range 64 {
		body = fmt.Appendf(body, `{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant","content":"tok%d"},"done":false}`+"\n", i)
	}
	body = append(body, chatLineFinal+"\n"...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		sink := &discardSink{}
		if _, err := readStream(bytes.NewReader(body), chatText, sink); err != nil || sink.n != 64 {
			b.Fatalf("%d deltas: %v", sink.n, err)
		}
	}
}
