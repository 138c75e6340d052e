package nodewire

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fieldShapes are field num in every wire type, with values each hand
// decoder reads differently: empty and short strings, strings that are
// themselves a message's fields (a header's, a usage's, a map entry's,
// well formed or not), varints at their bounds, and a group.
func fieldShapes(num protowire.Number) [][]byte {
	tag := func(typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	varint := func(v uint64) []byte { return protowire.AppendVarint(tag(protowire.VarintType), v) }
	str := func(v ...byte) []byte { return protowire.AppendBytes(tag(protowire.BytesType), v) }
	return [][]byte{
		varint(0), varint(2), varint(1 << 40), varint(math.MaxUint64),
		protowire.AppendFixed32(tag(protowire.Fixed32Type), 1),
		protowire.AppendFixed64(tag(protowire.Fixed64Type), 1),
		append(tag(protowire.StartGroupType), tag(protowire.EndGroupType)...),
		str(), str('a'), str(0xff),
		str(0x08, 0x00), str(0x08, 0x80), str(0x0a, 0x00), str(0x0a, 0x01, 'n', 0x12, 0x01, 'v'),
		str(0x12, 0x01, 0xff), str(0x10, 0x01), str(0x18, 0x05), str(0x1a, 0x00), str(0x20, 0x01),
		str(0x11, 1, 0, 0, 0, 0, 0, 0, 0),
	}
}

// checkHandAgainstProto holds a hand decoder's answer for payload to
// proto.Unmarshal's: what it took, proto.Unmarshal decodes to an equal
// message; what it refused and proto.Unmarshal accepts, DecodeEnvelope
// decodes as proto.Unmarshal does. (What proto.Unmarshal refuses the
// generic decoder may take in a few documented non-canonical cases, see
// decodeGeneric; FuzzDecodeEnvelope holds it to those.)
func checkHandAgainstProto(t *testing.T, name string, payload []byte, got *iop.Envelope, took bool) {
	t.Helper()
	var ref iop.Envelope
	refErr := proto.Unmarshal(payload, &ref)
	if took {
		if refErr != nil {
			t.Fatalf("%s: the hand decoder took %x, which proto.Unmarshal refuses: %v", name, payload, refErr)
		}
		if !proto.Equal(got, &ref) {
			t.Fatalf("%s: hand decode of %x is %v, proto.Unmarshal's %v", name, payload, got, &ref)
		}
		return
	}
	if refErr != nil {
		return
	}
	env, err := DecodeEnvelope(bytes.Clone(payload))
	if err != nil || !proto.Equal(env, &ref) {
		t.Fatalf("%s: DecodeEnvelope of %x: %v (%v), proto.Unmarshal: %v (%v)", name, payload, env, err, &ref, refErr)
	}
}

// handInputs are the frames' or requests' bytes the decoders are held to:
// every field number of the message (and the ones past it) in every
// shape, alone and cut short, every pair of them, and each followed by a
// tag that is not one.
func handInputs(maxNum protowire.Number) map[string][]byte {
	var fields [][]byte
	for num := protowire.Number(1); num <= maxNum+1; num++ {
		fields = append(fields, fieldShapes(num)...)
	}
	in := map[string][]byte{}
	for i, f := range fields {
		for n := 1; n <= len(f); n++ {
			in[fmt.Sprintf("field %d cut to %d", i, n)] = f[:n]
		}
		for _, bad := range [][]byte{{0x00}, {0x80}, {0xff}, {0x07}} {
			in[fmt.Sprintf("field %d then %x", i, bad)] = append(bytes.Clone(f), bad...)
		}
		for j, g := range fields {
			in[fmt.Sprintf("fields %d, %d", i, j)] = append(bytes.Clone(f), g...)
		}
	}
	// A string cut short whose length byte reads as a field of the
	// message: a decoder that went on from the length would take it.
	for num := protowire.Number(1); num <= maxNum+1; num++ {
		for _, length := range []byte{0x08, 0x10, 0x18, 0x30, 0x38, 0x40} {
			in[fmt.Sprintf("field %d cut, length %x", num, length)] = append(protowire.AppendTag(nil, num, protowire.BytesType), length, 0x01)
		}
	}
	return in
}

// The head decoder takes only what proto.Unmarshal decodes, as it decodes
// it, over every field of a tunnel frame in every wire type, malformed or
// cut short: a field of a known number but another wire type (which
// proto.Unmarshal keeps as unknown) included.
func TestTunnelHeadAgainstProtoEveryShape42m(t *testing.T) {
	for name, inner := range handInputs(fieldTFRunID) {
		got, took := decodeTunnelHead(bytes.Clone(inner))
		checkHandAgainstProto(t, name, pbBytes(fieldEnvelopeTunnelFrame, inner), got, took)
	}
}

// The request decoder, the same over every field of a tunnelled request.
func TestTunnelRequestHandAgainstProtoEveryShape42m(t *testing.T) {
	for name, inner := range handInputs(fieldTRRunID) {
		p := pbBytes(fieldEnvelopeTunnelRequest, inner)
		got, took := decodeTunnelRequestHand(bytes.Clone(p))
		checkHandAgainstProto(t, name, p, got, took)
	}
}

// Shapes no encoder of ours writes that the hand decoders must still take
// and decode as proto.Unmarshal does: values past 32 bits (an int32 or
// enum truncated, an int64 kept whole), a negative enum, a header or an
// entry of only one half.
func TestHandDecodersWideValues42m(t *testing.T) {
	usage := func(parts ...[]byte) []byte { return pbBytes(fieldTFUsage, bytes.Join(parts, nil)) }
	for name, inner := range map[string][]byte{
		"kind negative":           pbVarint(fieldTFKind, uint64(math.MaxUint64)),
		"kind past 32 bits":       bytes.Join([][]byte{pbVarint(fieldTFKind, 1<<32|2), pbBytes(fieldTFHeaders, nil)}, nil),
		"status past 32 bits":     bytes.Join([][]byte{pbVarint(fieldTFStatusCode, 1<<33|200), pbBytes(fieldTFHeaders, nil)}, nil),
		"sequence 64 bits":        bytes.Join([][]byte{pbVarint(fieldTFSequence, math.MaxUint64), pbBytes(fieldTFRunID, []byte("r"))}, nil),
		"usage past 32 bits":      usage(pbVarint(fieldUsagePrompt, 1<<33|7), pbVarint(fieldUsageCompletion, 1<<40|9), pbVarint(fieldUsageTotal, 1<<35)),
		"usage negative":          usage(pbVarint(fieldUsagePrompt, uint64(math.MaxUint64)), pbVarint(fieldUsageCompletion, 1<<63), pbVarint(fieldUsageTotal, 1<<31)),
		"header value only":       pbBytes(fieldTFHeaders, pbBytes(fieldHeaderValue, []byte("v"))),
		"header value then name":  pbBytes(fieldTFHeaders, bytes.Join([][]byte{pbBytes(fieldHeaderValue, []byte("v")), pbBytes(fieldHeaderName, []byte("n"))}, nil)),
		"header value twice":      pbBytes(fieldTFHeaders, bytes.Join([][]byte{pbBytes(fieldHeaderValue, []byte("first")), pbBytes(fieldHeaderValue, []byte("2"))}, nil)),
		"many headers, one empty": bytes.Repeat(pbBytes(fieldTFHeaders, pbBytes(fieldHeaderName, []byte("X-A"))), 40),
	} {
		p := pbBytes(fieldEnvelopeTunnelFrame, inner)
		got, took := decodeTunnelHead(bytes.Clone(inner))
		checkSameAsProto(t, name, p, got, took)
	}
	for name, inner := range map[string][]byte{
		"timeout past 32 bits": pbVarint(fieldTRTimeoutSec, 1<<32|30),
		"stream 64 bits":       bytes.Join([][]byte{pbVarint(fieldTRStream, 1<<63), pbBytes(fieldTRAdapter, []byte("a"))}, nil),
		"header value only":    pbBytes(fieldTRHeaders, pbBytes(fieldHeaderValue, []byte("v"))),
		"entry value twice":    pbBytes(fieldTRMetadata, bytes.Join([][]byte{pbBytes(fieldMapKey, []byte("k")), pbBytes(fieldMapValue, []byte("1")), pbBytes(fieldMapValue, []byte("22"))}, nil)),
		"many entries":         bytes.Join([][]byte{bytes.Repeat(pbBytes(fieldTRMetadata, pbBytes(fieldMapKey, []byte("k"))), 20), pbBytes(fieldTRMetadata, pbBytes(fieldMapValue, []byte("v")))}, nil),
		"every string":         bytes.Join([][]byte{pbBytes(fieldTRRunID, []byte("r")), pbBytes(fieldTRSessionID, []byte("ss")), pbBytes(fieldTRPath, []byte("/p")), pbBytes(fieldTRMethod, []byte("GET")), pbBytes(fieldTRTarget, []byte("tgt")), pbBytes(fieldTRAdapter, []byte("ad"))}, nil),
	} {
		p := pbBytes(fieldEnvelopeTunnelRequest, inner)
		got, took := decodeTunnelRequestHand(bytes.Clone(p))
		checkSameAsProto(t, name, p, got, took)
	}
}
