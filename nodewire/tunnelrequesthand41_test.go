package nodewire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// handRequests are tunnelled requests as the edge sends them, and the
// edge cases of the shape.
func handRequests() []*iop.ProviderTunnelRequest {
	full := tunnelRequestEnvelope().GetProviderTunnelRequest()
	return []*iop.ProviderTunnelRequest{
		full,
		{Adapter: "vllm", Target: "qwen", Method: "POST", Path: "/v1/chat/completions?x=1", Stream: true, TimeoutSec: 300,
			Body: bytes.Repeat([]byte("é"), 5000), RunId: "run_1", SessionId: "s"},
		{Method: "POST"},
		{Body: []byte{}},
		{Headers: []*iop.Header{{}, {Name: "A"}, {Value: "v"}, {Name: "A", Value: "second"}}},
		{Metadata: map[string]string{"": "", "k": "", "ü": "ß"}},
		{TimeoutSec: 1<<32 - 1, Stream: false, RunId: "r"},
	}
}

func requestPayload(t testing.TB, r *iop.ProviderTunnelRequest) []byte {
	t.Helper()
	p, err := proto.Marshal(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: r}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every request decodes by hand to the message sent; only the body points
// into the payload (scribbling over the rest changes nothing decoded).
func TestTunnelRequestHandMatchesProto41(t *testing.T) {
	for i, r := range handRequests() {
		p := requestPayload(t, r)
		got, ok := decodeTunnelRequestHand(p)
		if !ok {
			t.Fatalf("%d: refused %v", i, r)
		}
		body := got.GetProviderTunnelRequest().GetBody()
		for j := range p {
			p[j] ^= 0x5a
		}
		want := proto.Clone(r).(*iop.ProviderTunnelRequest)
		gotReq := proto.Clone(got.GetProviderTunnelRequest()).(*iop.ProviderTunnelRequest)
		gotReq.Body, want.Body = nil, nil
		if !proto.Equal(gotReq, want) {
			t.Fatalf("%d: decoded %v, want %v", i, gotReq, want)
		}
		if len(r.GetBody()) > 0 && (len(body) != len(r.GetBody()) || bytes.Equal(body, r.GetBody())) {
			t.Fatalf("%d: the body does not point into the payload", i)
		}
		if env, err := DecodeEnvelope(requestPayload(t, r)); err != nil || !proto.Equal(env.GetProviderTunnelRequest(), r) {
			t.Fatalf("%d: DecodeEnvelope %v %v", i, env, err)
		}
	}
}

// A request as the edge sends it costs six allocations on the node (the
// generic decoder's 26): the envelope, the headers' structs and pointers,
// one string, the metadata map (two).
func TestTunnelRequestHandAllocations41(t *testing.T) {
	p := requestPayload(t, tunnelRequestEnvelope().GetProviderTunnelRequest())
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := decodeTunnelRequestHand(p); !ok {
			t.Fatal("refused")
		}
	}); n > 6 {
		t.Fatalf("%v allocations, want at most 6", n)
	}
}

// What the hand decoder does not take it leaves to the other decoders,
// which keep the message whole or report it, as proto.Unmarshal does.
func TestTunnelRequestHandOtherShapes41(t *testing.T) {
	field, varint := pbBytes, pbVarint
	for name, inner := range map[string][]byte{
		"unknown field":          field(12, []byte("x")),
		"unknown varint":         varint(13, 1),
		"method as varint":       varint(fieldTRMethod, 1),
		"stream as bytes":        field(fieldTRStream, []byte{1}),
		"path not utf-8":         field(fieldTRPath, []byte("/\xff")),
		"header unknown field":   field(fieldTRHeaders, field(3, nil)),
		"metadata unknown field": field(fieldTRMetadata, field(3, []byte("x"))),
		"metadata key not utf-8": field(fieldTRMetadata, field(fieldMapKey, []byte("\xc3"))),
		"truncated":              field(fieldTRRunID, []byte("run_1"))[:4],
		"fixed32":                protowire.AppendFixed32(protowire.AppendTag(nil, fieldTRTimeoutSec, protowire.Fixed32Type), 1),
	} {
		p := field(fieldEnvelopeTunnelRequest, inner)
		_, took := decodeTunnelRequestHand(p)
		checkLeftToOthers(t, name, p, took)
	}
}

// Encodings no encoder writes but protobuf accepts decode by hand as
// proto.Unmarshal decodes them: a string or the body sent twice keeps its
// last value, a metadata key sent twice its last value, an entry without
// a key or a value has an empty one, fields come in any order.
func TestTunnelRequestHandNonCanonical41(t *testing.T) {
	field := pbString
	entry := func(parts ...[]byte) []byte {
		return field(fieldTRMetadata, string(bytes.Join(parts, nil)))
	}
	for name, inner := range map[string][]byte{
		"strings twice": bytes.Join([][]byte{field(fieldTRRunID, "a"), field(fieldTRPath, "/p"), field(fieldTRRunID, "bb"), field(fieldTRPath, "")}, nil),
		"body twice":    bytes.Join([][]byte{field(fieldTRBody, "first"), field(fieldTRBody, "second")}, nil),
		"key twice":     bytes.Join([][]byte{entry(field(fieldMapKey, "k"), field(fieldMapValue, "1")), entry(field(fieldMapKey, "k"), field(fieldMapValue, "2"))}, nil),
		"entry halves":  bytes.Join([][]byte{entry(field(fieldMapValue, "no key")), entry(field(fieldMapKey, "no value")), entry()}, nil),
		"entry swapped": entry(field(fieldMapValue, "v"), field(fieldMapKey, "k"), field(fieldMapKey, "k2")),
		"reversed":      bytes.Join([][]byte{field(fieldTRRunID, "r"), protowire.AppendVarint(protowire.AppendTag(nil, fieldTRStream, protowire.VarintType), 7), field(fieldTRHeaders, ""), field(fieldTRAdapter, "vllm")}, nil),
	} {
		p := field(fieldEnvelopeTunnelRequest, string(inner))
		got, took := decodeTunnelRequestHand(p)
		checkSameAsProto(t, name, p, got, took)
	}
}

// FuzzTunnelRequestHandDecode: whatever the hand decoder accepts,
// proto.Unmarshal accepts too, as an equal message, and nothing decoded
// but the body points into the payload.
func FuzzTunnelRequestHandDecode(f *testing.F) {
	for _, r := range handRequests() {
		inner, _ := onlyEnvelopeField(requestPayload(f, r), fieldEnvelopeTunnelRequest)
		f.Add(inner)
	}
	f.Add([]byte{0x4a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, inner []byte) {
		p := protowire.AppendBytes(protowire.AppendTag(nil, fieldEnvelopeTunnelRequest, protowire.BytesType), inner)
		var ref iop.Envelope
		refErr := proto.Unmarshal(p, &ref)
		got, ok := decodeTunnelRequestHand(p)
		if !ok {
			return
		}
		if refErr != nil {
			t.Fatalf("hand decode accepted what proto refuses (%v): %x", refErr, p)
		}
		if !proto.Equal(got, &ref) {
			t.Fatalf("hand %v != proto %v for %x", got, &ref, p)
		}
		req := got.GetProviderTunnelRequest()
		req.Body = bytes.Clone(req.Body)
		for i := range p {
			p[i] ^= 0x55
		}
		if !proto.Equal(got, &ref) {
			t.Fatalf("scribbling over the payload changed %v (want %v)", got, &ref)
		}
	})
}
