package nodewire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fuzzMaxFrame is the frame limit the fuzz targets use, small enough that a
// length prefix over it is cheap to find.
const fuzzMaxFrame = 1 << 16

var updateCorpus = flag.Bool("update-fuzz-corpus", false,
	"rewrite the seed corpora in testdata/fuzz from real encoded envelopes")

// countingReader reads from data and records how much was consumed and the
// largest buffer a single Read was handed (ReadFrame reads the payload into
// one buffer of the frame's length).
type countingReader struct {
	r       *bytes.Reader
	read    int
	maxRead int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.maxRead = max(c.maxRead, len(p))
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countingReader{r: bytes.NewReader(data)}
		env, err := ReadFrame(r, fuzzMaxFrame)

		// Whatever the input, no buffer beyond the limit was handed out.
		if r.maxRead > fuzzMaxFrame {
			t.Fatalf("a %d-byte read buffer with max %d", r.maxRead, fuzzMaxFrame)
		}
		switch {
		case len(data) == 0:
			if err != io.EOF {
				t.Fatalf("empty input: got %v, want io.EOF", err)
			}
			return
		case len(data) < frameHeaderLen:
			if err != io.ErrUnexpectedEOF {
				t.Fatalf("%d-byte input: got %v, want io.ErrUnexpectedEOF", len(data), err)
			}
			return
		}
		declared := int(binary.BigEndian.Uint32(data))
		switch {
		case declared > fuzzMaxFrame:
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("declared %d > %d: got %v, want ErrFrameTooLarge", declared, fuzzMaxFrame, err)
			}
			if r.read != frameHeaderLen {
				t.Fatalf("declared %d > %d: %d bytes read, want only the header", declared, fuzzMaxFrame, r.read)
			}
			return
		case len(data)-frameHeaderLen < declared:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("declared %d, %d available: got %v, want io.ErrUnexpectedEOF", declared, len(data)-frameHeaderLen, err)
			}
			return
		}
		if r.read != frameHeaderLen+declared {
			t.Fatalf("consumed %d bytes of a %d-byte frame", r.read, frameHeaderLen+declared)
		}
		if err != nil {
			if env != nil {
				t.Fatalf("error %v with a non-nil envelope", err)
			}
			return
		}
		if env.GetBody() == nil {
			t.Fatal("nil error with an empty envelope")
		}
		checkReencode(t, env)
	})
}

// FuzzDecodeEnvelope also holds DecodeEnvelope (hand-coded tunnel frames,
// the generated vtprotobuf decoder and ValidUTF8) to proto.Unmarshal, the
// reference decoder: whatever the reference accepts, DecodeEnvelope
// accepts as an equal message; what only DecodeEnvelope accepts (some
// non-canonical encodings) still decodes to a message proto.Marshal takes.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte{})
	rng := rand.New(rand.NewPCG(1, 1))
	for range 4 {
		f.Add(randomTunnelRequest(rng)) // the aliasing path of decodeTunnelRequest
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		env, err := DecodeEnvelope(payload)
		ref := &iop.Envelope{}
		refErr := proto.Unmarshal(payload, ref)
		if refErr == nil && ref.Body == nil {
			refErr = ErrEmptyEnvelope
		}
		// DecodeEnvelope accepts everything proto.Unmarshal does, and some
		// non-canonical input it refuses (see DecodeEnvelope); what it
		// returns for that is still a well-formed message.
		if refErr == nil && err != nil {
			t.Fatalf("DecodeEnvelope refused what proto.Unmarshal accepts: %v (payload %x)", err, payload)
		}
		if err != nil {
			if env != nil {
				t.Fatalf("error %v with a non-nil envelope", err)
			}
			return
		}
		if refErr != nil {
			if env.GetBody() == nil {
				t.Fatal("nil error with an empty envelope")
			}
			b, merr := proto.Marshal(env)
			if merr != nil {
				t.Fatalf("DecodeEnvelope returned a message proto.Marshal refuses: %v (payload %x)", merr, payload)
			}
			again := &iop.Envelope{}
			if uerr := proto.Unmarshal(b, again); uerr != nil || !proto.Equal(again, env) {
				t.Fatalf("re-encoded result does not decode to itself: %v", uerr)
			}
			checkReencode(t, env)
			return
		}
		if !proto.Equal(env, ref) {
			t.Fatalf("DecodeEnvelope gave %v, proto.Unmarshal %v", env, ref)
		}
		if env.GetBody() == nil {
			t.Fatal("nil error with an empty envelope")
		}
		checkReencode(t, env)
	})
}

// checkReencode: a decoded envelope encodes again, and that encoding is a
// fixed point of decode/encode; it also survives a frame round trip.
func checkReencode(t *testing.T, env *iop.Envelope) {
	t.Helper()
	det := proto.MarshalOptions{Deterministic: true}
	b1, err := det.Marshal(env)
	if err != nil {
		t.Fatalf("re-encoding a decoded envelope: %v", err)
	}
	env2, err := DecodeEnvelope(b1)
	if err != nil {
		t.Fatalf("decoding a re-encoded envelope: %v", err)
	}
	b2, err := det.Marshal(env2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("encoding is not stable:\n%x\n%x", b1, b2)
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, env, 0); err != nil {
		t.Fatalf("WriteFrame of a decoded envelope: %v", err)
	}
	env3, err := ReadFrame(&buf, 0)
	if err != nil {
		t.Fatalf("ReadFrame of a decoded envelope: %v", err)
	}
	if b3, _ := det.Marshal(env3); !bytes.Equal(b1, b3) {
		t.Fatal("frame round trip changed the envelope")
	}
}

// TestFuzzCorpusPresent keeps the checked-in seed corpora from silently
// disappearing; -update-fuzz-corpus regenerates them.
func TestFuzzCorpusPresent(t *testing.T) {
	if *updateCorpus {
		writeFuzzCorpus(t)
	}
	for _, name := range []string{"FuzzReadFrame", "FuzzDecodeEnvelope"} {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) < 5 {
			t.Fatalf("%s: %d seed files, want at least 5 (run go test -run TestFuzzCorpusPresent -update-fuzz-corpus)", name, len(files))
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), "go test fuzz v1\n[]byte(") {
				t.Fatalf("%s: not a go test fuzz v1 []byte seed", file)
			}
		}
	}
}

func writeFuzzCorpus(t *testing.T) {
	seedName := func(env *iop.Envelope) string {
		name := fmt.Sprintf("%T", env.Body) // *iop.Envelope_RunEvent
		name = strings.TrimPrefix(name, "*iop.Envelope_")
		return strings.ToLower(name)
	}
	frames := map[string][]byte{}
	payloads := map[string][]byte{}
	var all []byte
	for i, env := range sampleEnvelopes() {
		if env.GetProviderTunnelFrame().GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
			env = tunnelBodyEnvelope(256) // keep the corpus small
		}
		frame := frameBytes(t, env)
		name := fmt.Sprintf("%02d_%s", i, seedName(env))
		frames[name] = frame
		payloads[name] = frame[frameHeaderLen:]
		all = append(all, frame...)
	}
	reg := frameBytes(t, sampleEnvelopes()[0])
	frames["two_frames"] = all
	frames["truncated_payload"] = reg[:len(reg)-3]
	frames["truncated_header"] = reg[:2]
	frames["oversize_header"] = append(header(fuzzMaxFrame+1), reg[frameHeaderLen:]...)
	frames["huge_header"] = header(1 << 31)
	frames["empty_envelope"] = header(0)
	frames["unknown_field"] = append(header(3), 0x98, 0x06, 0x01)
	payloads["unknown_field"] = []byte{0x98, 0x06, 0x01}
	payloads["garbage"] = []byte{0xff, 0xff, 0xff}
	payloads["wrong_wire_type"] = []byte{0x08, 0x01} // field 1 as a varint

	write := func(dir string, seeds map[string][]byte) {
		dir = filepath.Join("testdata", "fuzz", dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzReadFrame", frames)
	write("FuzzDecodeEnvelope", payloads)
}
