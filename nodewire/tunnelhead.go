package nodewire

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Besides its BODY frames, a tunnelled answer is a STATUS frame (the
// provider's status and headers), often a USAGE frame and an END frame.
// The generated decoder makes a string per header name and value and a
// struct per header, about fifteen allocations for an answer's head, on
// every tunnelled request. decodeTunnelHead decodes those frames by hand
// into one tunnelEnvelope, the headers' structs and pointers in two
// blocks, and every string of the frame (names, values, run id) as pieces
// of one. It accepts only what proto.Unmarshal accepts, decoded to an
// equal message (FuzzTunnelHeadDecode); anything else (a body, an error,
// metadata, unknown fields, malformed bytes) is left to the generic
// decoder, which reports what is wrong.

// Field numbers of the head frames (proto/iop/runtime.proto).
const (
	fieldTFHeaders protowire.Number = 4
	fieldTFUsage   protowire.Number = 8

	fieldHeaderName  protowire.Number = 1
	fieldHeaderValue protowire.Number = 2

	fieldUsagePrompt     protowire.Number = 1
	fieldUsageCompletion protowire.Number = 2
	fieldUsageTotal      protowire.Number = 3
)

// decodeTunnelHead decodes inner, a ProviderTunnelFrame's bytes within its
// envelope (onlyEnvelopeField's inner), when the frame has only scalar
// fields, headers, usage and a run id; ok is false otherwise. Nothing it
// returns points into inner, so inner may lie in a buffer reused later.
func decodeTunnelHead(inner []byte) (env *iop.Envelope, ok bool) {
	te := &tunnelEnvelope{}
	te.wrap.ProviderTunnelFrame = &te.frame
	te.env.Body = &te.wrap
	f := &te.frame
	// The headers' names and values (in inner) until the frame is read
	// whole; an answer's head has a dozen or fewer.
	type header struct{ name, value []byte }
	var hbuf [16]header
	headers := hbuf[:0]
	var runID []byte // the last run id sent, as protobuf keeps it
	size := 0        // the bytes of every string kept
	for b := inner; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && (num == fieldTFKind || num == fieldTFSequence || num == fieldTFStatusCode || num == fieldTFEnd):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
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
		case typ == protowire.BytesType && (num == fieldTFHeaders || num == fieldTFUsage || num == fieldTFRunID):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			switch num {
			case fieldTFHeaders:
				name, value, ok := consumeHeader(v)
				if !ok {
					return nil, false
				}
				headers = append(headers, header{name, value})
				size += len(name) + len(value)
			case fieldTFUsage:
				if f.Usage == nil {
					f.Usage = &iop.Usage{}
				}
				// A usage sent twice merges, as protobuf merges it.
				if !decodeUsage(v, f.Usage) {
					return nil, false
				}
			default:
				if !utf8.Valid(v) {
					return nil, false
				}
				runID = v
			}
		default:
			return nil, false
		}
	}
	// Every string of the frame as a piece of one: the headers' bytes,
	// then the run id's.
	var sb strings.Builder
	sb.Grow(size + len(runID))
	for _, h := range headers {
		sb.Write(h.name)
		sb.Write(h.value)
	}
	sb.Write(runID)
	all := sb.String()
	if len(headers) > 0 {
		block := make([]iop.Header, len(headers))
		f.Headers = make([]*iop.Header, len(headers))
		at := 0
		for i, h := range headers {
			hd := &block[i]
			hd.Name = all[at : at+len(h.name)]
			at += len(h.name)
			hd.Value = all[at : at+len(h.value)]
			at += len(h.value)
			f.Headers[i] = hd
		}
	}
	f.RunId = all[len(all)-len(runID):]
	return &te.env, true
}

// consumeHeader reads b, a Header message, for its name and value (a field
// sent twice keeps its last value, as protobuf does); ok is false for any
// other field, malformed bytes or a string that is not UTF-8.
func consumeHeader(b []byte) (name, value []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != fieldHeaderName && num != fieldHeaderValue) {
			return nil, nil, false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 || !utf8.Valid(v) {
			return nil, nil, false
		}
		b = b[n:]
		if num == fieldHeaderName {
			name = v
		} else {
			value = v
		}
	}
	return name, value, true
}

// decodeUsage reads b, a Usage message, into u; ok is false for any
// other field or malformed bytes.
func decodeUsage(b []byte, u *iop.Usage) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.VarintType || num < fieldUsagePrompt || num > fieldUsageTotal {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch num {
		case fieldUsagePrompt:
			u.PromptTokens = int64(v)
		case fieldUsageCompletion:
			u.CompletionTokens = int64(v)
		default:
			u.TotalTokens = int64(v)
		}
	}
	return true
}
