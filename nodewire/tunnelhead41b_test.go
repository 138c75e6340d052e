package nodewire

import "testing"

// BenchmarkTunnelHeadFrame decodes an answer's STATUS frame (a vLLM
// answer's headers) by hand and with the generic decoder, in one run.
func BenchmarkTunnelHeadFrame(b *testing.B) {
	p := marshalFrame(b, headFrames()[0])
	inner, _ := onlyEnvelopeField(p, fieldEnvelopeTunnelFrame)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeTunnelHead(inner); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeGeneric(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
