package nodewire

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnelled request's envelope besides its body is a few short strings
// (adapter, target, method, path, session and run ids), the forwarded
// headers and the metadata map. The generated decoder makes a string per
// value, a struct per header and copies the body: about twenty
// allocations on every request the node receives. decodeTunnelRequestHand
// decodes that shape by hand: the envelope, wrapper and request in one
// allocation, the headers' structs and pointers in two, every string as a
// piece of one, and the body pointing into the payload. It accepts only
// what proto.Unmarshal accepts, decoded to an equal message
// (FuzzTunnelRequestHandDecode); anything else (an unknown field, a known
// one with another wire type, malformed bytes, a string that is not
// UTF-8) is left to decodeTunnelRequest and the generic decoder.

// Field numbers of ProviderTunnelRequest (proto/iop/runtime.proto) besides
// the body's (fieldTRBody).
const (
	fieldTRAdapter    protowire.Number = 1
	fieldTRTarget     protowire.Number = 2
	fieldTRMethod     protowire.Number = 3
	fieldTRPath       protowire.Number = 4
	fieldTRHeaders    protowire.Number = 5
	fieldTRStream     protowire.Number = 7
	fieldTRTimeoutSec protowire.Number = 8
	fieldTRMetadata   protowire.Number = 9
	fieldTRSessionID  protowire.Number = 10
	fieldTRRunID      protowire.Number = 11

	fieldMapKey   protowire.Number = 1
	fieldMapValue protowire.Number = 2
)

// tunnelRequestHand holds what decodeTunnelRequestHand returns; the
// pointers into it keep all of it alive.
type tunnelRequestHand struct {
	env  iop.Envelope
	wrap iop.Envelope_ProviderTunnelRequest
	req  iop.ProviderTunnelRequest
}

// The string fields of a request, in the order they are laid out in the
// one string decodeTunnelRequestHand makes.
const (
	trAdapter = iota
	trTarget
	trMethod
	trPath
	trSessionID
	trRunID
	trStrings
)

// decodeTunnelRequestHand decodes payload when it is exactly one
// ProviderTunnelRequest envelope of the usual shape; ok is false for
// anything else. The body points into payload, which the caller allocated
// for this frame alone (DecodeEnvelope's contract); nothing else does.
func decodeTunnelRequestHand(payload []byte) (env *iop.Envelope, ok bool) {
	inner, ok := onlyEnvelopeField(payload, fieldEnvelopeTunnelRequest)
	if !ok {
		return nil, false
	}
	te := &tunnelRequestHand{}
	te.wrap.ProviderTunnelRequest = &te.req
	te.env.Body = &te.wrap
	r := &te.req
	type pair struct{ a, b []byte } // a header's name and value, an entry's key and value
	var hbuf, mbuf [8]pair
	headers, metadata := hbuf[:0], mbuf[:0]
	var strs [trStrings][]byte // the last value of each string field, as protobuf keeps it
	size := 0                  // the bytes of the headers' and the metadata's strings
	for b := inner; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == fieldTRStream || num == fieldTRTimeoutSec) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			if num == fieldTRStream {
				r.Stream = v != 0
			} else {
				r.TimeoutSec = uint32(v)
			}
			continue
		}
		if typ != protowire.BytesType {
			return nil, false
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch num {
		case fieldTRBody:
			// Full slice expression: an append by a consumer cannot run
			// into the bytes after it.
			r.Body = v[:len(v):len(v)]
		case fieldTRHeaders:
			name, value, ok := consumeHeader(v)
			if !ok {
				return nil, false
			}
			headers = append(headers, pair{name, value})
			size += len(name) + len(value)
		case fieldTRMetadata:
			key, value, ok := consumeMapEntry(v)
			if !ok {
				return nil, false
			}
			metadata = append(metadata, pair{key, value})
			size += len(key) + len(value)
		default:
			i := stringField(num)
			if i < 0 || !utf8.Valid(v) {
				return nil, false
			}
			strs[i] = v
		}
	}
	for _, s := range strs {
		size += len(s)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, s := range strs {
		sb.Write(s)
	}
	for _, h := range headers {
		sb.Write(h.a)
		sb.Write(h.b)
	}
	for _, m := range metadata {
		sb.Write(m.a)
		sb.Write(m.b)
	}
	all := sb.String()
	at := 0
	next := func(n int) string {
		s := all[at : at+n]
		at += n
		return s
	}
	r.Adapter, r.Target, r.Method = next(len(strs[trAdapter])), next(len(strs[trTarget])), next(len(strs[trMethod]))
	r.Path, r.SessionId, r.RunId = next(len(strs[trPath])), next(len(strs[trSessionID])), next(len(strs[trRunID]))
	if len(headers) > 0 {
		block := make([]iop.Header, len(headers))
		r.Headers = make([]*iop.Header, len(headers))
		for i, h := range headers {
			hd := &block[i]
			hd.Name, hd.Value = next(len(h.a)), next(len(h.b))
			r.Headers[i] = hd
		}
	}
	if len(metadata) > 0 {
		r.Metadata = make(map[string]string, len(metadata))
		for _, m := range metadata {
			k := next(len(m.a))
			r.Metadata[k] = next(len(m.b)) // a key sent twice keeps its last value
		}
	}
	return &te.env, true
}

// stringField is the index in decodeTunnelRequestHand's strings of a
// request's string field num, or -1 when num is not one.
func stringField(num protowire.Number) int {
	switch num {
	case fieldTRAdapter:
		return trAdapter
	case fieldTRTarget:
		return trTarget
	case fieldTRMethod:
		return trMethod
	case fieldTRPath:
		return trPath
	case fieldTRSessionID:
		return trSessionID
	case fieldTRRunID:
		return trRunID
	}
	return -1
}

// consumeMapEntry reads b, a map<string, string> entry, for its key and
// value (either absent is empty; a field sent twice keeps its last
// value); ok is false for any other field, malformed bytes or a string
// that is not UTF-8.
func consumeMapEntry(b []byte) (key, value []byte, ok bool) {
	// A map entry is laid out as a Header is: key 1, value 2, strings.
	return consumeHeader(b)
}
