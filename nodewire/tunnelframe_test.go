package nodewire

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func tunnelEnv(f *iop.ProviderTunnelFrame) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}}
}

// simpleFrames are frames of the hand-coded shape, edge values included.
func simpleFrames() []*iop.ProviderTunnelFrame {
	fs := []*iop.ProviderTunnelFrame{
		{},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, Body: []byte("data: {}\n\n"), RunId: "run-1"},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 99, End: true, RunId: "r"},
		{Kind: iop.TunnelFrameKind(-3), StatusCode: -1, Sequence: math.MaxUint64},
		{StatusCode: math.MaxInt32, Body: bytes.Repeat([]byte{0xff}, MaxBodyChunk), RunId: "é✓"},
		{StatusCode: math.MinInt32, Body: []byte{}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		f := &iop.ProviderTunnelFrame{
			Kind:       iop.TunnelFrameKind(rng.Int32N(12) - 2),
			Sequence:   rng.Uint64() >> rng.IntN(64),
			StatusCode: rng.Int32() - math.MaxInt32/2,
			End:        rng.IntN(2) == 0,
		}
		if n := rng.IntN(300); n > 0 {
			f.Body = make([]byte, n)
			for i := range f.Body {
				f.Body[i] = byte(rng.UintN(256))
			}
		}
		if rng.IntN(2) == 0 {
			f.RunId = "run-" + string(rune('a'+rng.IntN(26)))
		}
		fs = append(fs, f)
	}
	return fs
}

// The hand-coded encoding is byte for byte proto.Marshal's, and the
// decoder reads it back to an equal message.
func TestTunnelFrameMatchesProto(t *testing.T) {
	for i, f := range simpleFrames() {
		env := tunnelEnv(f)
		if simpleTunnelFrame(env) == nil {
			t.Fatalf("%d: not simple", i)
		}
		want, err := proto.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		got := appendTunnelFrame(nil, f)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d: encoded\n%x\nwant\n%x", i, got, want)
		}
		dec, ok := decodeTunnelFrame(got)
		if !ok {
			t.Fatalf("%d: fast decode refused its own encoding", i)
		}
		if !proto.Equal(dec, env) {
			t.Fatalf("%d: decoded %v, want %v", i, dec, env)
		}
	}
}

// Frames with any other field set take the generic codec both ways and
// still round-trip.
func TestTunnelFrameOtherShapes(t *testing.T) {
	unknown := tunnelEnv(&iop.ProviderTunnelFrame{Body: []byte("x")})
	unknown.GetProviderTunnelFrame().ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	for i, env := range []*iop.Envelope{
		tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200, Headers: []*iop.Header{{Name: "Content-Type", Value: "text/event-stream"}}}),
		tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Usage: &iop.Usage{PromptTokens: 3}}),
		tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true, Error: &iop.RunError{Message: "boom"}}),
		tunnelEnv(&iop.ProviderTunnelFrame{Metadata: map[string]string{"k": "v"}}),
		unknown,
		{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{RunId: "r"}}},
	} {
		if simpleTunnelFrame(env) != nil {
			t.Fatalf("%d: taken as simple", i)
		}
		payload, err := proto.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeTunnelFrame(payload); ok {
			t.Fatalf("%d: fast decode took %x", i, payload)
		}
		buf, err := AppendFrame(nil, env, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadFrame(bytes.NewReader(buf), 0)
		if err != nil || !proto.Equal(got, env) {
			t.Fatalf("%d: round trip %v %v", i, got, err)
		}
	}
}

// Malformed payloads near the fast shape are refused by the fast decoder
// and reported by the generic one.
func TestTunnelFrameMalformed(t *testing.T) {
	good := appendTunnelFrame(nil, &iop.ProviderTunnelFrame{Sequence: 1, Body: []byte("abc"), RunId: "r"})
	badUTF8 := appendTunnelFrame(nil, &iop.ProviderTunnelFrame{RunId: "\xff"})
	for name, p := range map[string][]byte{
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte(nil), good...), 0),
		"bad utf-8":      badUTF8,
		"varint overrun": {0x4a, 0x02, 0x08, 0xff},
	} {
		if _, ok := decodeTunnelFrame(p); ok {
			t.Errorf("%s: fast decode accepted %x", name, p)
		}
		if _, err := DecodeEnvelope(p); err == nil {
			t.Errorf("%s: DecodeEnvelope accepted %x", name, p)
		} else if errors.Is(err, ErrEmptyEnvelope) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A known field with another wire type is an unknown field to protobuf:
// the fast decoder leaves it to the generic one, which keeps it.
func TestTunnelFrameWrongWireType(t *testing.T) {
	p := []byte{0x4a, 0x02, 0x0a, 0x00} // field 1 (kind) as bytes
	if _, ok := decodeTunnelFrame(p); ok {
		t.Fatal("fast decode accepted a mistyped field")
	}
	env, err := DecodeEnvelope(p)
	if err != nil || len(env.GetProviderTunnelFrame().ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("generic decode: %v %v", env, err)
	}
}

// FuzzTunnelFrameDecode: whatever the fast decoder accepts, proto.Unmarshal
// accepts too, as an equal message.
func FuzzTunnelFrameDecode(f *testing.F) {
	for _, fr := range simpleFrames()[:6] {
		f.Add(appendTunnelFrame(nil, fr))
	}
	f.Add([]byte{0x4a, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		fast, ok := decodeTunnelFrame(p)
		if !ok {
			return
		}
		var ref iop.Envelope
		if err := proto.Unmarshal(p, &ref); err != nil {
			t.Fatalf("fast decode accepted what proto refuses (%v): %x", err, p)
		}
		if !proto.Equal(fast, &ref) {
			t.Fatalf("fast %v != proto %v for %x", fast, &ref, p)
		}
	})
}

// BenchmarkTunnelBodyFrame encodes and decodes one streamed chunk's frame,
// through the hand-coded path and through the generic codec in the same
// run (the ratio is what the fast path saves per chunk on each side).
func BenchmarkTunnelBodyFrame(b *testing.B) {
	f := &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 42, RunId: "01JDXQ3V8N7R2K5M9P4T6W8Y0Z",
		Body: []byte(`data: {"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion.chunk","created":1735689600,"model":"bench-model","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	env := tunnelEnv(f)
	buf := make([]byte, 0, 1024)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = appendTunnelFrame(buf[:0], f)
			if _, err := DecodeEnvelope(append([]byte(nil), buf...)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], env); err != nil {
				b.Fatal(err)
			}
			var got iop.Envelope
			if err := proto.Unmarshal(append([]byte(nil), buf...), &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Encodings no encoder writes but protobuf accepts (a bool sent as 2, a
// field repeated where the last one wins, an enum past int32 sent in ten
// bytes) decode by hand exactly as proto.Unmarshal decodes them.
func TestTunnelFrameNonCanonical(t *testing.T) {
	frame := func(fields ...[]byte) []byte {
		inner := bytes.Join(fields, nil)
		b := protowire.AppendTag(nil, fieldEnvelopeTunnelFrame, protowire.BytesType)
		return protowire.AppendBytes(b, inner)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	bytesField := func(num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	cases := map[string][]byte{
		"end as 2":               frame(varint(fieldTFEnd, 2)),
		"end as a large varint":  frame(varint(fieldTFEnd, 1<<40)),
		"end set then cleared":   frame(varint(fieldTFEnd, 1), varint(fieldTFEnd, 0)),
		"kind past int32":        frame(varint(fieldTFKind, 1<<32|3)),
		"status past int32":      frame(varint(fieldTFStatusCode, 1<<33|200)),
		"body twice":             frame(bytesField(fieldTFBody, "first"), bytesField(fieldTFBody, "second")),
		"run id twice":           frame(bytesField(fieldTFRunID, "a"), bytesField(fieldTFRunID, "b")),
		"fields out of order":    frame(bytesField(fieldTFRunID, "r"), varint(fieldTFSequence, 7), varint(fieldTFKind, 2)),
		"sequence in ten bytes":  frame(varint(fieldTFSequence, math.MaxUint64)),
		"empty body then a body": frame(bytesField(fieldTFBody, ""), bytesField(fieldTFBody, "x")),
	}
	for name, payload := range cases {
		want := &iop.Envelope{}
		if err := proto.Unmarshal(payload, want); err != nil {
			t.Fatalf("%s: proto.Unmarshal: %v", name, err)
		}
		got, ok := decodeTunnelFrame(payload)
		if !ok {
			t.Fatalf("%s: fast decode refused it", name)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%s: decoded %v, want %v", name, got, want)
		}
	}
}
