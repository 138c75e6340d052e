package nodewire

import (
	"google.golang.org/protobuf/encoding/protowire"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnelled request reaches the node as one envelope that is mostly its
// body: a whole prompt, often tens of KiB. The generic decoder copies bytes
// fields out of the payload, so each request cost a second allocation of
// the prompt's size and a copy of it, from a payload discarded right after.
// decodeTunnelRequest decodes the rest of the request with the generic
// decoder, from a copy of the payload without the body field (headers and
// metadata: small), and points the body into the payload. Anything unusual
// (the body field sent twice or with another wire type, a malformed field,
// more than the one envelope field) is left to the generic path, so the
// result is always the generic decoder's; TestDecodeTunnelRequestMatches
// and FuzzDecodeEnvelope hold it to that.

const (
	fieldEnvelopeTunnelRequest protowire.Number = 8 // Envelope.provider_tunnel_request
	fieldTRBody                protowire.Number = 6 // ProviderTunnelRequest.body

	// aliasBodyMin is the smallest body pointed into the payload; a
	// smaller one is cheaper to copy than the rest of the request.
	aliasBodyMin = 4 << 10
)

// decodeTunnelRequest decodes payload when it is exactly one
// ProviderTunnelRequest envelope with one body of at least aliasBodyMin
// bytes; ok is false for anything else, which the caller decodes
// generically.
func decodeTunnelRequest(payload []byte) (env *iop.Envelope, ok bool) {
	if len(payload) < aliasBodyMin {
		return nil, false // no room for such a body: the common small request skips the walk
	}
	inner, ok := onlyEnvelopeField(payload, fieldEnvelopeTunnelRequest)
	if !ok {
		return nil, false
	}
	var body []byte
	start, end := -1, -1 // the body field (tag, length and bytes) in inner
	for i := 0; i < len(inner); {
		num, typ, tn := protowire.ConsumeTag(inner[i:])
		if tn < 0 {
			return nil, false
		}
		vn := protowire.ConsumeFieldValue(num, typ, inner[i+tn:])
		if vn < 0 {
			return nil, false
		}
		if num == fieldTRBody {
			if typ != protowire.BytesType || start >= 0 {
				return nil, false
			}
			body, _ = protowire.ConsumeBytes(inner[i+tn:])
			start, end = i, i+tn+vn
		}
		i += tn + vn
	}
	if len(body) < aliasBodyMin {
		return nil, false
	}
	rest := len(inner) - (end - start)
	stripped := make([]byte, 0, protowire.SizeTag(fieldEnvelopeTunnelRequest)+protowire.SizeVarint(uint64(rest))+rest)
	stripped = protowire.AppendTag(stripped, fieldEnvelopeTunnelRequest, protowire.BytesType)
	stripped = protowire.AppendVarint(stripped, uint64(rest))
	stripped = append(append(stripped, inner[:start]...), inner[end:]...)
	env, err := decodeGeneric(stripped)
	if err != nil {
		return nil, false // the generic path reports it, for the whole payload
	}
	req := env.GetProviderTunnelRequest()
	if req == nil {
		return nil, false
	}
	// Full slice expression: an append by a consumer cannot run into the
	// bytes after it.
	req.Body = body[:len(body):len(body)]
	return env, true
}
