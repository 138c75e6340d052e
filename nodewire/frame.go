// Package nodewire is the Edge-Node transport: length-prefixed protobuf
// frames on multiplexed streams of one TCP (optionally TLS) connection that
// the Node dials out to the Edge, with the register/ready handshake and
// heartbeats both ways. docs/wire.md is the prose version of this package.
package nodewire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const (
	// ProtocolVersion is the version carried in RegisterRequest. Bump it on
	// any incompatible change of message framing, stream layout or
	// handshake. The multiplexer below it is versioned separately, by the
	// preface's last byte: a peer speaking another multiplexer framing is
	// refused before it can send a RegisterRequest.
	ProtocolVersion = 3

	// DefaultMaxFrameSize bounds one frame's payload. It must hold the
	// largest request body the Edge accepts plus the envelope around it.
	DefaultMaxFrameSize = 16 << 20

	// MaxBodyChunk bounds the body bytes of one tunnel frame so that one large
	// response is interleaved fairly with other streams and never needs a
	// large buffer on either side.
	MaxBodyChunk = 32 << 10

	frameHeaderLen = 4
)

// Frame errors. Any of them means the stream is unusable.
var (
	// ErrFrameTooLarge is returned when a length prefix exceeds the maximum;
	// it is detected before anything is allocated for the payload.
	ErrFrameTooLarge = errors.New("nodewire: frame too large")
	// ErrEmptyEnvelope is returned for a frame whose envelope has no body.
	ErrEmptyEnvelope = errors.New("nodewire: empty envelope")
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// WriteFrame encodes env as one frame (4-byte big-endian payload length, then
// the protobuf payload) and writes it with a single Write call, so frames of
// concurrent writers on one stream would never interleave mid-frame (callers
// still serialise writers: see Stream).
func WriteFrame(w io.Writer, env *iop.Envelope, maxSize int) error {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 { // don't keep huge buffers alive in the pool
			bufPool.Put(bp)
		}
	}()
	buf, err := AppendFrame((*bp)[:0], env, maxSize)
	if err != nil {
		return err
	}
	*bp = buf
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("nodewire: write: %w", err)
	}
	return nil
}

// AppendFrame appends env, encoded as one frame, to dst. On error dst is
// returned unchanged (truncated to its original length).
func AppendFrame(dst []byte, env *iop.Envelope, maxSize int) ([]byte, error) {
	start := len(dst)
	buf := append(dst, 0, 0, 0, 0)
	if f := simpleTunnelFrame(env); f != nil {
		buf = appendTunnelFrame(buf, f) // see tunnelframe.go
	} else {
		// The generated vtprotobuf codec (same wire format as proto.Marshal,
		// without reflection); it does not check UTF-8, which proto.Marshal
		// would, so ValidUTF8 does first (see runtime_utf8.pb.go).
		if !env.ValidUTF8() {
			return dst[:start], fmt.Errorf("%w: %w", ErrEncode, errInvalidUTF8)
		}
		size := env.SizeVT()
		if size > maxFrame(maxSize) {
			return dst[:start], fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, size, maxFrame(maxSize))
		}
		buf = slices.Grow(buf, size)[:len(buf)+size]
		if _, err := env.MarshalToSizedBufferVT(buf[len(buf)-size:]); err != nil {
			return dst[:start], fmt.Errorf("%w: %w", ErrEncode, err)
		}
	}
	n := len(buf) - start - frameHeaderLen
	if n > maxFrame(maxSize) {
		return dst[:start], fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, n, maxFrame(maxSize))
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return buf, nil
}

// maxFrame is the frame size limit for a maxSize argument: <= 0 means
// DefaultMaxFrameSize.
func maxFrame(maxSize int) int {
	if maxSize <= 0 {
		return DefaultMaxFrameSize
	}
	return maxSize
}

// checkFrameLen is the ErrFrameTooLarge for a received length prefix n
// over maxSize (<= 0: DefaultMaxFrameSize), or nil.
func checkFrameLen(n uint32, maxSize int) error {
	if limit := maxFrame(maxSize); uint64(n) > uint64(limit) {
		return fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, n, limit)
	}
	return nil
}

// errInvalidUTF8 is a string field that is not valid UTF-8, which proto3
// forbids on both sides of the wire.
var errInvalidUTF8 = errors.New("a string field is not valid UTF-8")

// ReadFrame reads one frame and decodes its envelope. maxSize <= 0 means
// DefaultMaxFrameSize. A length over maxSize fails with ErrFrameTooLarge
// before any payload allocation; a stream that ends mid-frame fails with
// io.ErrUnexpectedEOF; a stream that ends cleanly between frames returns
// io.EOF.
func ReadFrame(r io.Reader, maxSize int) (*iop.Envelope, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err // io.EOF between frames, io.ErrUnexpectedEOF inside a header
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if err := checkFrameLen(n, maxSize); err != nil {
		return nil, err
	}
	payload, err := readPayload(r, int(n))
	if err != nil {
		return nil, fmt.Errorf("nodewire: read payload: %w", err)
	}
	return DecodeEnvelope(payload)
}

// eagerPayload is the payload size allocated up front; larger payloads grow
// with the bytes that actually arrive, so a peer that announces a large frame
// and sends little costs little memory.
const eagerPayload = 64 << 10

func readPayload(r io.Reader, n int) ([]byte, error) {
	if n <= eagerPayload {
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return payload, nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, eagerPayload))
	got, err := io.CopyN(buf, r, int64(n))
	if got < int64(n) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeEnvelope decodes one frame payload. The envelope may alias
// payload (a tunnel frame's body does, and a tunnelled request's), so
// payload must not be reused.
func DecodeEnvelope(payload []byte) (*iop.Envelope, error) {
	if env, ok := decodeTunnelFrame(payload); ok { // see tunnelframe.go
		return env, nil
	}
	if inner, ok := onlyEnvelopeField(payload, fieldEnvelopeTunnelFrame); ok {
		if env, ok := decodeTunnelHead(inner); ok { // see tunnelhead.go
			return env, nil
		}
	}
	if env, ok := decodeTunnelRequestHand(payload); ok { // see tunnelrequesthand.go
		return env, nil
	}
	if env, ok := decodeTunnelRequest(payload); ok { // see tunnelrequest.go
		return env, nil
	}
	return decodeGeneric(payload)
}

// decodeGeneric is DecodeEnvelope for any payload.
//
// The generated vtprotobuf decoder, without reflection. Where it differs
// from proto.Unmarshal, the reference: it accepts strings that are not
// UTF-8 (ValidUTF8 refuses them here); it refuses a known field with
// another wire type, which proto.Unmarshal keeps as an unknown field; it
// reads a map entry's key and value whatever their wire types, and checks
// unknown groups less strictly. A payload whose map entries are not
// well-formed (CheckMapEntries), that it refuses, or that kept unknown
// fields is decoded by proto.Unmarshal instead. So whatever proto.Unmarshal
// accepts is accepted with the same result; beyond that, some non-canonical
// encodings no encoder writes are accepted (a ten-byte varint with bits
// past 64, a string field sent twice whose first value was not UTF-8), and
// what they decode to is still a well-formed message. FuzzDecodeEnvelope
// checks both. Bytes fields are copied out of payload.
func decodeGeneric(payload []byte) (*iop.Envelope, error) {
	env := &iop.Envelope{}
	if !env.CheckMapEntries(payload) || env.UnmarshalVT(payload) != nil || env.HasUnknownFields() {
		env = &iop.Envelope{}
		if err := proto.Unmarshal(payload, env); err != nil {
			return nil, fmt.Errorf("nodewire: decode: %w", err)
		}
	} else if !env.ValidUTF8() {
		return nil, fmt.Errorf("nodewire: decode: %w", errInvalidUTF8)
	}
	if env.Body == nil {
		return nil, ErrEmptyEnvelope
	}
	return env, nil
}
