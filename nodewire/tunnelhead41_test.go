package nodewire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// headFrames are the head frames a tunnelled answer carries, as the node
// sends them (nodeagent's tunnelSink).
func headFrames() []*iop.ProviderTunnelFrame {
	return []*iop.ProviderTunnelFrame{
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, StatusCode: 200, RunId: "run_0123456789abcdef01234567", Headers: []*iop.Header{
			{Name: "Content-Type", Value: "application/json"}, {Name: "Date", Value: "Mon, 07 Dec 2026 21:00:00 GMT"},
			{Name: "Server", Value: "uvicorn"}, {Name: "Vary", Value: "Origin"}, {Name: "Vary", Value: "Accept-Encoding"},
		}},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, StatusCode: 503, RunId: "r", Headers: []*iop.Header{{Name: "Retry-After"}, {Value: "v"}, {}}},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, StatusCode: 200, Headers: []*iop.Header{{Name: "X-É", Value: "ünïcode"}}},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Sequence: 3, RunId: "run_1", Usage: &iop.Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Sequence: 3, Usage: &iop.Usage{}},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Sequence: 3, Usage: &iop.Usage{PromptTokens: -1, TotalTokens: 1 << 40}},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 4, End: true, RunId: "run_1"},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: -7, Headers: make([]*iop.Header, 0)},
	}
}

// marshalFrame is what the node writes for f: the generic encoding.
func marshalFrame(t testing.TB, f *iop.ProviderTunnelFrame) []byte {
	t.Helper()
	p, err := proto.Marshal(tunnelEnv(f))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every head frame the node sends decodes by hand to the message sent, and
// none of its strings point into the bytes decoded: the edge decodes a
// STATUS frame straight from a receive buffer that a later frame reuses.
func TestTunnelHeadMatchesProto41(t *testing.T) {
	for i, f := range headFrames() {
		p := marshalFrame(t, f)
		inner, ok := onlyEnvelopeField(p, fieldEnvelopeTunnelFrame)
		if !ok {
			t.Fatalf("%d: not a tunnel frame", i)
		}
		got, ok := decodeTunnelHead(inner)
		if !ok {
			t.Fatalf("%d: refused %v", i, f)
		}
		for j := range p {
			p[j] = 0xff
		}
		if !proto.Equal(got, tunnelEnv(f)) {
			t.Fatalf("%d: decoded %v, want %v", i, got, f)
		}
		if env, err := DecodeEnvelope(marshalFrame(t, f)); err != nil || !proto.Equal(env, tunnelEnv(f)) {
			t.Fatalf("%d: DecodeEnvelope %v %v", i, env, err)
		}
	}
}

// A STATUS frame's head costs four allocations however many headers it
// has: the envelope, the headers' structs, their pointers, and one string
// for every name, value and the run id.
func TestTunnelHeadAllocations41(t *testing.T) {
	p := marshalFrame(t, headFrames()[0])
	inner, _ := onlyEnvelopeField(p, fieldEnvelopeTunnelFrame)
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := decodeTunnelHead(inner); !ok {
			t.Fatal("refused")
		}
	}); n > 4 {
		t.Fatalf("%v allocations, want at most 4", n)
	}
}

// What the hand decoder does not take (a body, an error, metadata, an
// unknown field, a field of another wire type, malformed bytes, a string
// that is not UTF-8) it leaves to the generic decoder, which keeps the
// message whole or reports it.
func TestTunnelHeadOtherShapes41(t *testing.T) {
	field := pbBytes
	header := func(parts ...[]byte) []byte { return field(fieldTFHeaders, bytes.Join(parts, nil)) }
	for name, inner := range map[string][]byte{
		"body":                   marshalInner(t, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Body: []byte("x"), Headers: []*iop.Header{{Name: "a"}}}),
		"error":                  marshalInner(t, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true, Error: &iop.RunError{Message: "m"}}),
		"metadata":               marshalInner(t, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_METADATA, Metadata: map[string]string{"k": "v"}}),
		"header unknown field":   header(field(3, []byte("x"))),
		"header name as varint":  header(pbVarint(fieldHeaderName, 1)),
		"header name not utf-8":  header(field(fieldHeaderName, []byte("\xff"))),
		"header value truncated": header([]byte{0x12, 0x05, 'a'}),
		"headers as varint":      pbVarint(fieldTFHeaders, 1),
		"usage unknown field":    field(fieldTFUsage, pbVarint(4, 1)),
		"usage field as bytes":   field(fieldTFUsage, field(fieldUsagePrompt, []byte("1"))),
		"run id not utf-8":       field(fieldTFRunID, []byte("\xc3")),
		"truncated":              header(field(fieldHeaderName, []byte("abc")))[:5],
	} {
		_, took := decodeTunnelHead(inner)
		checkLeftToOthers(t, name, field(fieldEnvelopeTunnelFrame, inner), took)
	}
}

// Encodings no encoder writes but protobuf accepts decode by hand as
// proto.Unmarshal decodes them: a string field sent twice keeps its last
// value, a usage sent twice merges, fields come in any order.
func TestTunnelHeadNonCanonical41(t *testing.T) {
	field, varint := pbBytes, pbVarint
	for name, inner := range map[string][]byte{
		"name twice":      field(fieldTFHeaders, bytes.Join([][]byte{field(fieldHeaderName, []byte("a")), field(fieldHeaderValue, []byte("v")), field(fieldHeaderName, []byte("Bb"))}, nil)),
		"run id twice":    bytes.Join([][]byte{field(fieldTFRunID, []byte("first")), field(fieldTFHeaders, field(fieldHeaderName, []byte("h"))), field(fieldTFRunID, []byte("2nd"))}, nil),
		"usage twice":     bytes.Join([][]byte{field(fieldTFUsage, varint(fieldUsagePrompt, 5)), field(fieldTFUsage, varint(fieldUsageTotal, 9)), field(fieldTFUsage, varint(fieldUsagePrompt, 7))}, nil),
		"reversed fields": bytes.Join([][]byte{field(fieldTFRunID, []byte("r")), field(fieldTFHeaders, nil), varint(fieldTFStatusCode, 201), varint(fieldTFKind, 2), varint(fieldTFEnd, 2)}, nil),
		"empty run id":    field(fieldTFRunID, nil),
	} {
		got, took := decodeTunnelHead(inner)
		checkSameAsProto(t, name, field(fieldEnvelopeTunnelFrame, inner), got, took)
	}
}

func marshalInner(t testing.TB, f *iop.ProviderTunnelFrame) []byte {
	t.Helper()
	inner, ok := onlyEnvelopeField(marshalFrame(t, f), fieldEnvelopeTunnelFrame)
	if !ok {
		t.Fatal("not a tunnel frame")
	}
	return inner
}

// FuzzTunnelHeadDecode: whatever the hand decoder accepts, proto.Unmarshal
// accepts too, as an equal message, and nothing decoded points into the
// bytes it came from.
func FuzzTunnelHeadDecode(f *testing.F) {
	for _, fr := range headFrames() {
		f.Add(marshalInner(f, fr))
	}
	f.Add([]byte{0x22, 0x00})
	f.Add([]byte{0x42, 0x02, 0x08, 0x01, 0x42, 0x00})
	f.Fuzz(func(t *testing.T, inner []byte) {
		p := protowire.AppendBytes(protowire.AppendTag(nil, fieldEnvelopeTunnelFrame, protowire.BytesType), inner)
		var ref iop.Envelope
		refErr := proto.Unmarshal(p, &ref)
		got, ok := decodeTunnelHead(inner)
		if !ok {
			return
		}
		if refErr != nil {
			t.Fatalf("hand decode accepted what proto refuses (%v): %x", refErr, inner)
		}
		for i := range inner {
			inner[i] ^= 0x55
		}
		if !proto.Equal(got, &ref) {
			t.Fatalf("hand %v != proto %v for %x", got, &ref, p)
		}
	})
}
