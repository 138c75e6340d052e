package nodewire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// sampleEnvelopes covers the envelope kinds of every stream type: handshake,
// control, run, tunnel, cancel and command.
func sampleEnvelopes() []*iop.Envelope {
	return []*iop.Envelope{
		{Body: &iop.Envelope_RegisterRequest{RegisterRequest: &iop.RegisterRequest{
			ProtocolVersion: ProtocolVersion, NodeId: "node-1", Token: "tok", AgentVersion: "v1.2.3",
			AdapterTypes: []string{"openai_compat", "vllm"},
		}}},
		{Body: &iop.Envelope_RegisterResponse{RegisterResponse: acceptResponse("node-1", testHeartbeat)}},
		{Body: &iop.Envelope_NodeReadyRequest{NodeReadyRequest: &iop.NodeReadyRequest{NodeId: "node-1"}}},
		{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{Sequence: 42, SentUnixNano: 1700000000000000000}}},
		{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
			RunId: "run-1", Adapter: "local-vllm", Target: "llama", Input: &iop.RunInput{},
			Metadata: map[string]string{"request_id": "r1", "trace": "t"}, Stream: true, Operation: iop.RunOperation_RUN_OPERATION_CHAT,
		}}},
		smallDeltaEnvelope(),
		tunnelBodyEnvelope(4 << 10),
		{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
			Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, StatusCode: 200,
			Headers: []*iop.Header{{Name: "Content-Type", Value: "text/event-stream"}, {Name: "X-A", Value: "1"}, {Name: "X-A", Value: "2"}},
		}}},
		{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
			Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "run-1", Reason: "client_disconnect",
		}}},
		{Body: &iop.Envelope_NodeCommandResponse{NodeCommandResponse: &iop.NodeCommandResponse{
			Type: "providers", PayloadJson: []byte(`{}`),
			Providers: []*iop.ProviderSnapshot{{NodeId: "node-1", ProviderId: "local-vllm", Capacity: 4, KvCacheUsage: 0.25}},
		}}},
		// A body whose message is empty still counts as a body.
		{Body: &iop.Envelope_NodeReadyResponse{NodeReadyResponse: &iop.NodeReadyResponse{}}},
	}
}

func smallDeltaEnvelope() *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
		RunId: "run-0123456789", Sequence: 17, Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "Hello, wor",
	}}}
}

func tunnelBodyEnvelope(n int) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
		Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, RunId: "run-0123456789",
		Body: bytes.Repeat([]byte("data: x\n\n"), n/9+1)[:n],
	}}}
}

func frameBytes(t testing.TB, env *iop.Envelope) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFrame(&buf, env, 0); err != nil {
		t.Fatalf("WriteFrame: %v", err)
	}
	return buf.Bytes()
}

func header(n uint32) []byte {
	var h [frameHeaderLen]byte
	binary.BigEndian.PutUint32(h[:], n)
	return h[:]
}

func TestFrameRoundTrip(t *testing.T) {
	envs := sampleEnvelopes()
	var stream bytes.Buffer
	for _, env := range envs {
		before := stream.Len()
		if err := WriteFrame(&stream, env, 0); err != nil {
			t.Fatalf("WriteFrame(%T): %v", env.Body, err)
		}
		frame := stream.Bytes()[before:]
		// Wire shape: 4-byte big-endian payload length, then the payload.
		if got, want := binary.BigEndian.Uint32(frame), uint32(len(frame)-frameHeaderLen); got != want {
			t.Fatalf("%T: length prefix %d, payload is %d bytes", env.Body, got, want)
		}
		if want := proto.Size(env); len(frame)-frameHeaderLen != want {
			t.Fatalf("%T: payload %d bytes, proto.Size %d", env.Body, len(frame)-frameHeaderLen, want)
		}
	}
	for i, want := range envs {
		got, err := ReadFrame(&stream, 0)
		if err != nil {
			t.Fatalf("ReadFrame #%d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("frame #%d: got %v, want %v", i, got, want)
		}
	}
	if _, err := ReadFrame(&stream, 0); err != io.EOF {
		t.Fatalf("after the last frame: got %v, want io.EOF", err)
	}
}

// oneWriteCounter counts Write calls.
type oneWriteCounter struct {
	bytes.Buffer
	writes int
}

func (w *oneWriteCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestWriteFrameSingleWrite(t *testing.T) {
	for _, env := range sampleEnvelopes() {
		var w oneWriteCounter
		if err := WriteFrame(&w, env, 0); err != nil {
			t.Fatal(err)
		}
		if w.writes != 1 {
			t.Fatalf("%T: %d Write calls, want 1 (a frame must never be split)", env.Body, w.writes)
		}
	}
}

// hugeHeaderReader yields a length prefix claiming size and fails the test
// on any read past it: ReadFrame must reject the frame from the header alone.
type hugeHeaderReader struct {
	t        *testing.T
	hdr      []byte
	extraErr error
	extra    int // reads attempted past the header
}

func (r *hugeHeaderReader) Read(p []byte) (int, error) {
	if len(r.hdr) > 0 {
		n := copy(p, r.hdr)
		r.hdr = r.hdr[n:]
		return n, nil
	}
	r.extra++
	r.t.Errorf("ReadFrame read past an oversize header (a %d-byte read)", len(p))
	return 0, r.extraErr
}

func TestReadFrameOversizeRejectedBeforeAllocation(t *testing.T) {
	cases := []struct {
		name  string
		claim uint32
		max   int
	}{
		{"2GiB claim, default max", 1 << 31, 0},
		{"max uint32 claim, default max", 1<<32 - 1, 0},
		{"one over default max", DefaultMaxFrameSize + 1, 0},
		{"one over small max", 1<<16 + 1, 1 << 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &hugeHeaderReader{t: t, hdr: header(tc.claim), extraErr: errors.New("must not be read")}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			env, err := ReadFrame(r, tc.max)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("got (%v, %v), want ErrFrameTooLarge", env, err)
			}
			if r.extra != 0 {
				t.Fatalf("%d reads past the header", r.extra)
			}
			// Nothing near the claimed size may have been allocated. The
			// bound leaves room for unrelated runtime allocations.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Fatalf("ReadFrame allocated %d bytes for a rejected frame", grew)
			}
		})
	}
}

func TestFrameSizeBoundary(t *testing.T) {
	env := tunnelBodyEnvelope(1000)
	frame := frameBytes(t, env)
	size := len(frame) - frameHeaderLen

	if _, err := ReadFrame(bytes.NewReader(frame), size); err != nil {
		t.Fatalf("ReadFrame with max == size: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame), size-1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("ReadFrame with max == size-1: got %v, want ErrFrameTooLarge", err)
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, env, size); err != nil {
		t.Fatalf("WriteFrame with max == size: %v", err)
	}
	buf.Reset()
	if err := WriteFrame(&buf, env, size-1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("WriteFrame with max == size-1: got %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("WriteFrame wrote %d bytes of an oversize frame", buf.Len())
	}
}

func TestWriteFrameTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := WriteFrame(&buf, tunnelBodyEnvelope(64<<10), 32<<10)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes written for a rejected frame", buf.Len())
	}
	// The pooled buffer the failed call used must not leak into the next
	// frame.
	if err := WriteFrame(&buf, smallDeltaEnvelope(), 0); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(&buf, 0)
	if err != nil || !proto.Equal(got, smallDeltaEnvelope()) {
		t.Fatalf("frame after a rejected one: got (%v, %v)", got, err)
	}
}

func TestReadFrameTruncated(t *testing.T) {
	full := frameBytes(t, smallDeltaEnvelope())
	cases := []struct {
		name string
		in   []byte
		want error // compared with ==
	}{
		{"clean EOF between frames", nil, io.EOF},
		{"1-byte header", full[:1], io.ErrUnexpectedEOF},
		{"3-byte header", full[:3], io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, err := ReadFrame(bytes.NewReader(tc.in), 0)
			if err != tc.want {
				t.Fatalf("got (%v, %v), want %v", env, err, tc.want)
			}
		})
	}
	// A payload cut short wraps io.ErrUnexpectedEOF (never a bare io.EOF,
	// which would read as a clean end of stream).
	for _, cut := range []int{frameHeaderLen, frameHeaderLen + 1, len(full) - 1} {
		env, err := ReadFrame(bytes.NewReader(full[:cut]), 0)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("payload cut at %d of %d: got (%v, %v), want io.ErrUnexpectedEOF", cut, len(full), env, err)
		}
		if err == io.EOF {
			t.Fatalf("payload cut at %d: bare io.EOF", cut)
		}
	}
	// A clean EOF after whole frames is io.EOF.
	r := bytes.NewReader(append(append([]byte{}, full...), full...))
	for i := 0; i < 2; i++ {
		if _, err := ReadFrame(r, 0); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if _, err := ReadFrame(r, 0); err != io.EOF {
		t.Fatalf("after two frames: got %v, want io.EOF", err)
	}
}

// errReader fails every read after yielding data.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadFramePropagatesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	full := frameBytes(t, smallDeltaEnvelope())
	for _, cut := range []int{0, 2, frameHeaderLen, len(full) - 1} {
		_, err := ReadFrame(&errReader{data: full[:cut], err: boom}, 0)
		if !errors.Is(err, boom) {
			t.Fatalf("cut at %d: got %v, want the reader's error", cut, err)
		}
	}
}

func TestReadFrameEmptyEnvelope(t *testing.T) {
	cases := []struct {
		name    string
		payload []byte
	}{
		{"zero-length payload", nil},
		// A field this version does not know (a newer peer's message kind)
		// leaves the body unset.
		{"unknown field only", []byte{0x98, 0x06, 0x01}}, // field 99, varint 1
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append(header(uint32(len(tc.payload))), tc.payload...)
			env, err := ReadFrame(bytes.NewReader(in), 0)
			if !errors.Is(err, ErrEmptyEnvelope) {
				t.Fatalf("got (%v, %v), want ErrEmptyEnvelope", env, err)
			}
			if _, err := DecodeEnvelope(tc.payload); !errors.Is(err, ErrEmptyEnvelope) {
				t.Fatalf("DecodeEnvelope: got %v, want ErrEmptyEnvelope", err)
			}
		})
	}
	// What a writer produces for an empty envelope is rejected by readers.
	var buf bytes.Buffer
	if err := WriteFrame(&buf, &iop.Envelope{}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrame(&buf, 0); !errors.Is(err, ErrEmptyEnvelope) {
		t.Fatalf("empty envelope round trip: got %v, want ErrEmptyEnvelope", err)
	}
}

func TestReadFrameGarbagePayload(t *testing.T) {
	payload := []byte{0xff, 0xff, 0xff}
	in := append(header(uint32(len(payload))), payload...)
	env, err := ReadFrame(bytes.NewReader(in), 0)
	if err == nil || errors.Is(err, ErrEmptyEnvelope) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got (%v, %v), want a decode error", env, err)
	}
	if !strings.Contains(err.Error(), "decode") {
		t.Fatalf("error %q does not say decode", err)
	}
}

// TestFrameRoundTripProperty: any sequence of run events and tunnel frames
// written to one stream reads back identical and in order, then io.EOF.
func TestFrameRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(rt, "frames")
		var want []*iop.Envelope
		var buf bytes.Buffer
		for i := 0; i < n; i++ {
			var env *iop.Envelope
			if rapid.Bool().Draw(rt, "tunnel") {
				env = &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
					Kind:     iop.TunnelFrameKind(rapid.IntRange(0, 6).Draw(rt, "kind")),
					Sequence: rapid.Uint64().Draw(rt, "seq"),
					Body:     rapid.SliceOfN(rapid.Byte(), 0, MaxBodyChunk).Draw(rt, "body"),
					End:      rapid.Bool().Draw(rt, "end"),
				}}}
			} else {
				env = &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
					RunId:    rapid.StringMatching(`[a-z0-9-]{0,20}`).Draw(rt, "run"),
					Sequence: rapid.Uint64().Draw(rt, "seq"),
					Type:     iop.RunEventType(rapid.IntRange(0, 5).Draw(rt, "type")),
					Delta:    rapid.String().Draw(rt, "delta"),
					Metadata: rapid.MapOfN(rapid.StringN(0, 8, -1), rapid.StringN(0, 8, -1), 0, 4).Draw(rt, "md"),
				}}}
			}
			if err := WriteFrame(&buf, env, 0); err != nil {
				rt.Fatalf("WriteFrame: %v", err)
			}
			want = append(want, env)
		}
		for i, w := range want {
			got, err := ReadFrame(&buf, 0)
			if err != nil {
				rt.Fatalf("ReadFrame #%d: %v", i, err)
			}
			if !proto.Equal(got, w) {
				rt.Fatalf("frame #%d differs", i)
			}
		}
		if _, err := ReadFrame(&buf, 0); err != io.EOF {
			rt.Fatalf("after %d frames: got %v, want io.EOF", n, err)
		}
	})
}

var benchFrames = []struct {
	name string
	env  func() *iop.Envelope
}{
	{"TunnelBody4KiB", func() *iop.Envelope { return tunnelBodyEnvelope(4 << 10) }},
	{"RunEventDelta", smallDeltaEnvelope},
	{"TunnelRequest", tunnelRequestEnvelope},
	{"TunnelStatus", tunnelStatusEnvelope},
}

// tunnelRequestEnvelope is what the edge sends per tunnelled chat request:
// filtered headers, metadata, a ~200-byte body.
func tunnelRequestEnvelope() *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "run_0123456789abcdef", Method: "POST", Path: "/chat/completions", SessionId: "sess-1",
		Headers:  []*iop.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Accept", Value: "*/*"}, {Name: "User-Agent", Value: "OpenAI/Python 1.99.0"}},
		Body:     []byte(`{"model":"target-model","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in five words, please, and nothing else at all."}],"max_tokens":32}`),
		Metadata: map[string]string{"request_id": "req_0123456789abcdef", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}}}
}

// tunnelStatusEnvelope is the node's first frame of a tunnelled answer.
func tunnelStatusEnvelope() *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
		Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, StatusCode: 200, RunId: "run_0123456789abcdef",
		Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Date", Value: "Fri, 04 Dec 2026 02:00:00 GMT"}, {Name: "Server", Value: "uvicorn"}},
	}}}
}

func BenchmarkWriteFrame(b *testing.B) {
	for _, bf := range benchFrames {
		b.Run(bf.name, func(b *testing.B) {
			env := bf.env()
			b.SetBytes(int64(proto.Size(env) + frameHeaderLen))
			b.ReportAllocs()
			for b.Loop() {
				if err := WriteFrame(io.Discard, env, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadFrame(b *testing.B) {
	for _, bf := range benchFrames {
		b.Run(bf.name, func(b *testing.B) {
			frame := frameBytes(b, bf.env())
			r := bytes.NewReader(frame)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(frame)
				if _, err := ReadFrame(r, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The generated codec checks UTF-8 as proto.Marshal and proto.Unmarshal
// do, wherever the string sits: a field, a repeated message's field, a map
// key or value, a oneof member, a repeated string. Encoding such a message
// fails with ErrEncode (the message is at fault, not the connection), and a
// payload carrying one (as a peer could send it) is refused on decode; the
// same message with a valid string goes through.
func TestFrameRefusesInvalidUTF8(t *testing.T) {
	tunnel := func(r *iop.ProviderTunnelRequest) *iop.Envelope {
		return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: r}}
	}
	run := func(r *iop.RunRequest) *iop.Envelope {
		return &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: r}}
	}
	for name, build := range map[string]func(s string) *iop.Envelope{
		"field": func(s string) *iop.Envelope { return tunnel(&iop.ProviderTunnelRequest{Path: s}) },
		"repeated msg": func(s string) *iop.Envelope {
			return tunnel(&iop.ProviderTunnelRequest{Headers: []*iop.Header{{Name: "X-A", Value: "v"}, {Name: "X-B", Value: s}}})
		},
		"map key": func(s string) *iop.Envelope {
			return tunnel(&iop.ProviderTunnelRequest{Metadata: map[string]string{s: "v"}})
		},
		"map value": func(s string) *iop.Envelope {
			return tunnel(&iop.ProviderTunnelRequest{Metadata: map[string]string{"k": s}})
		},
		"oneof string": func(s string) *iop.Envelope {
			return run(&iop.RunRequest{Input: &iop.RunInput{Messages: []*iop.ChatMessage{{Content: []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: s}}}}}}})
		},
		"repeated string": func(s string) *iop.Envelope {
			return run(&iop.RunRequest{Input: &iop.RunInput{EmbedInputs: []string{"a", s}}})
		},
		"envelope oneof": func(s string) *iop.Envelope {
			return &iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{RunId: s}}}
		},
	} {
		bad := build("ok\xff")
		if _, err := proto.Marshal(bad); err == nil {
			t.Fatalf("%s: proto.Marshal accepted it: not a case the reference refuses", name)
		}
		if _, err := AppendFrame(nil, bad, 0); !errors.Is(err, ErrEncode) {
			t.Errorf("%s: AppendFrame: %v, want ErrEncode", name, err)
		}
		payload, err := bad.MarshalVT() // what a peer that skips the check sends
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeEnvelope(payload); err == nil {
			t.Errorf("%s: DecodeEnvelope accepted %x", name, payload)
		}
		good := build("ok ✓")
		frame, err := AppendFrame(nil, good, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := ReadFrame(bytes.NewReader(frame), 0)
		if err != nil || !proto.Equal(got, good) {
			t.Errorf("%s: round trip: %v %v", name, got, err)
		}
	}
}

// A map entry whose value comes with another wire type is an unknown field
// to proto.Unmarshal (the value stays empty); the generated decoder would
// read the bytes after it as the value. DecodeEnvelope gives the
// reference's answer.
func TestDecodeMistypedMapEntry(t *testing.T) {
	entry := protowire.AppendTag(nil, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "k")
	entry = protowire.AppendTag(entry, 2, protowire.Fixed64Type)
	// Little endian: 0x12 first, read as a length by a decoder that ignores
	// the wire type: 18 bytes, the other seven and the unknown field below.
	entry = protowire.AppendFixed64(entry, 0x6161616161616112)
	entry = protowire.AppendTag(entry, 3, protowire.BytesType) // unknown field: what a misread value would swallow
	entry = protowire.AppendString(entry, "swallowed")
	frame := protowire.AppendTag(nil, 9, protowire.BytesType) // ProviderTunnelFrame.metadata
	frame = protowire.AppendBytes(frame, entry)
	payload := protowire.AppendTag(nil, 9, protowire.BytesType) // Envelope.provider_tunnel_frame
	payload = protowire.AppendBytes(payload, frame)

	if (*iop.Envelope)(nil).CheckMapEntries(payload) {
		t.Fatal("CheckMapEntries accepted a fixed64 map value")
	}
	want := &iop.Envelope{}
	if err := proto.Unmarshal(payload, want); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEnvelope(payload)
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("DecodeEnvelope: %v %v, want %v", got, err, want)
	}
	if v := got.GetProviderTunnelFrame().GetMetadata()["k"]; v != "" {
		t.Fatalf("metadata value %q, want empty (the mistyped value is dropped)", v)
	}
}
