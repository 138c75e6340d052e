package nodewire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A streamed tunnel answer is almost all BODY frames: an Envelope holding a
// ProviderTunnelFrame with a kind, a sequence number, the run id and the
// body bytes. Encoding and decoding those through the generic protobuf
// codec was the largest share of the wire's per-chunk cost (reflection over
// the message layout, and a copy of the body on decode). The two functions
// below handle exactly that shape by hand with protowire and produce and
// accept the same bytes the generic codec does (the wire format does not
// change; the tests compare both byte for byte and FuzzTunnelFrameDecode
// checks every accepted payload against proto.Unmarshal). A frame with
// headers or usage (an answer's STATUS and USAGE frames) takes
// decodeTunnelHead (tunnelhead.go); any other message, or a frame with any
// other field set, the generic path.

// Field numbers of the hand-coded shape (proto/iop/runtime.proto).
const (
	fieldEnvelopeTunnelFrame protowire.Number = 9

	fieldTFKind       protowire.Number = 1
	fieldTFSequence   protowire.Number = 2
	fieldTFStatusCode protowire.Number = 3
	fieldTFBody       protowire.Number = 5
	fieldTFEnd        protowire.Number = 6
	fieldTFRunID      protowire.Number = 10
)

// simpleTunnelFrame returns env's tunnel frame when it has only scalar
// fields and a body set (no headers, error, usage, metadata, or unknown
// fields), else nil.
func simpleTunnelFrame(env *iop.Envelope) *iop.ProviderTunnelFrame {
	b, ok := env.GetBody().(*iop.Envelope_ProviderTunnelFrame)
	if !ok || b.ProviderTunnelFrame == nil {
		return nil
	}
	f := b.ProviderTunnelFrame
	if len(f.Headers) > 0 || f.Error != nil || f.Usage != nil || len(f.Metadata) > 0 ||
		len(f.ProtoReflect().GetUnknown()) > 0 || len(env.ProtoReflect().GetUnknown()) > 0 {
		return nil
	}
	return f
}

// tunnelFrameSize is the encoded size of f's scalar fields and body (f
// from simpleTunnelFrame).
func tunnelFrameSize(f *iop.ProviderTunnelFrame) int {
	n := 0
	if f.Kind != 0 {
		n += 1 + protowire.SizeVarint(uint64(f.Kind))
	}
	if f.Sequence != 0 {
		n += 1 + protowire.SizeVarint(f.Sequence)
	}
	if f.StatusCode != 0 {
		n += 1 + protowire.SizeVarint(uint64(f.StatusCode))
	}
	if len(f.Body) > 0 {
		n += 1 + protowire.SizeBytes(len(f.Body))
	}
	if f.End {
		n += 2
	}
	if len(f.RunId) > 0 {
		n += 1 + protowire.SizeBytes(len(f.RunId))
	}
	return n
}

// appendTunnelFrame appends the Envelope around f (f from
// simpleTunnelFrame), in field order, as proto.Marshal writes it. Negative
// enum and int32 values are sign-extended to ten bytes, as protobuf
// requires.
func appendTunnelFrame(b []byte, f *iop.ProviderTunnelFrame) []byte {
	b = protowire.AppendTag(b, fieldEnvelopeTunnelFrame, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(tunnelFrameSize(f)))
	if f.Kind != 0 {
		b = protowire.AppendTag(b, fieldTFKind, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(f.Kind))
	}
	if f.Sequence != 0 {
		b = protowire.AppendTag(b, fieldTFSequence, protowire.VarintType)
		b = protowire.AppendVarint(b, f.Sequence)
	}
	if f.StatusCode != 0 {
		b = protowire.AppendTag(b, fieldTFStatusCode, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(f.StatusCode))
	}
	if len(f.Body) > 0 {
		b = protowire.AppendTag(b, fieldTFBody, protowire.BytesType)
		b = protowire.AppendBytes(b, f.Body)
	}
	if f.End {
		b = protowire.AppendTag(b, fieldTFEnd, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if len(f.RunId) > 0 {
		b = protowire.AppendTag(b, fieldTFRunID, protowire.BytesType)
		b = protowire.AppendString(b, f.RunId)
	}
	return b
}

// onlyEnvelopeField returns the bytes of an Envelope's message field num
// when payload is that field and nothing else; ok is false otherwise.
func onlyEnvelopeField(payload []byte, num protowire.Number) (inner []byte, ok bool) {
	got, typ, n := protowire.ConsumeTag(payload)
	if n < 0 || got != num || typ != protowire.BytesType {
		return nil, false
	}
	inner, m := protowire.ConsumeBytes(payload[n:])
	if m < 0 || n+m != len(payload) {
		return nil, false
	}
	return inner, true
}

// decodeTunnelFrame decodes payload when it is an Envelope holding only a
// ProviderTunnelFrame with only the fields appendTunnelFrame writes; ok is
// false for anything else (including malformed input), which the caller
// hands to proto.Unmarshal. The body aliases payload, which the caller
// allocated for this frame alone.
func decodeTunnelFrame(payload []byte) (env *iop.Envelope, ok bool) {
	inner, ok := onlyEnvelopeField(payload, fieldEnvelopeTunnelFrame)
	if !ok {
		return nil, false
	}
	// The envelope, its oneof wrapper and the frame in one allocation: a
	// stream decodes one of these per chunk.
	te := &tunnelEnvelope{}
	if !te.decode(inner) {
		return nil, false
	}
	return &te.env, true
}

// decode is decodeTunnelFrame into te, which it resets first, given the
// frame's bytes within the envelope (onlyEnvelopeField's inner); false
// leaves te in no particular state.
func (te *tunnelEnvelope) decode(inner []byte) bool {
	*te = tunnelEnvelope{}
	te.wrap.ProviderTunnelFrame = &te.frame
	te.env.Body = &te.wrap
	f := &te.frame
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		if n < 0 {
			return false
		}
		inner = inner[n:]
		switch {
		case typ == protowire.VarintType && (num == fieldTFKind || num == fieldTFSequence || num == fieldTFStatusCode || num == fieldTFEnd):
			v, n := protowire.ConsumeVarint(inner)
			if n < 0 {
				return false
			}
			inner = inner[n:]
			switch num {
			case fieldTFKind:
				f.Kind = iop.TunnelFrameKind(int32(v))
			case fieldTFSequence:
				f.Sequence = v
			case fieldTFStatusCode:
				f.StatusCode = int32(v)
			default:
				f.End = v != 0
			}
		case typ == protowire.BytesType && (num == fieldTFBody || num == fieldTFRunID):
			v, n := protowire.ConsumeBytes(inner)
			if n < 0 {
				return false
			}
			inner = inner[n:]
			if num == fieldTFBody {
				// Full slice expression: an append by a consumer cannot
				// run into the bytes after it.
				f.Body = v[:len(v):len(v)]
				continue
			}
			if !utf8.Valid(v) {
				return false // proto.Unmarshal reports it
			}
			f.RunId = string(v)
		default:
			return false
		}
	}
	return true
}

// tunnelEnvelope holds what decodeTunnelFrame returns; the pointers into
// it keep all of it alive, as three allocations would keep themselves.
// Stream.RecvLent reuses them from tunnelEnvelopes.
type tunnelEnvelope struct {
	env   iop.Envelope
	wrap  iop.Envelope_ProviderTunnelFrame
	frame iop.ProviderTunnelFrame
}
