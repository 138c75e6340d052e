package nodewire

import (
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// lastWholeFrameRef is the plain reading of what LastQueued looks for: the
// payload of the last frame among unread whose length is within maxSize and
// all of whose bytes are there, walking from the first; nil when none.
func lastWholeFrameRef(unread []byte, maxSize int) []byte {
	var last []byte
	for len(unread) >= frameHeaderLen {
		size := int(binary.BigEndian.Uint32(unread))
		if size > maxSize || len(unread)-frameHeaderLen < size {
			break
		}
		last = unread[frameHeaderLen : frameHeaderLen+size]
		unread = unread[frameHeaderLen+size:]
	}
	return last
}

// LastQueued reads a hostile peer's queued bytes (truncated or huge length
// prefixes, zero-length frames, garbage) without panicking, blocking or
// consuming anything, and answers exactly the last whole frame within the
// stream's limit.
func FuzzStreamLastQueued(f *testing.F) {
	frame := func(env *iop.Envelope) []byte {
		b, err := AppendFrame(nil, env, 0)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	end := frame(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}))
	body := frame(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")}))
	f.Add(append(append([]byte{}, body...), end...), 0, 64)
	f.Add(append(append([]byte{}, end...), 0, 0, 0), 0, 64)                // a truncated prefix after it
	f.Add(append(append([]byte{}, end...), 0xff, 0xff, 0xff, 0xff), 0, 64) // a huge length after it
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, 0, 16)                           // zero-length frames
	f.Add(append(append([]byte{}, body...), end...), 3, 8)                 // frames over the limit
	f.Add(end, 0, len(end)-frameHeaderLen)                                 // a frame of exactly the limit
	f.Add(append(append([]byte{}, end...), body...), 0, 64)                // a BODY last: its bytes must be copied
	f.Fuzz(func(t *testing.T, data []byte, off int, maxSize int) {
		if off < 0 || off > len(data) {
			off = 0
		}
		if maxSize <= 0 || maxSize > 1<<20 {
			maxSize = 1 << 20
		}
		rbuf := append([]byte(nil), data...)
		st := &Stream{s: &muxStream{rbuf: rbuf, roff: off}, maxFrame: maxSize}
		env, ok := st.LastQueued()
		if st.s.roff != off || len(st.s.rbuf) != len(data) || string(st.s.rbuf) != string(data) {
			t.Fatal("LastQueued changed the unread bytes")
		}
		want := lastWholeFrameRef(data[off:], maxSize)
		if want == nil {
			if ok {
				t.Fatalf("no whole frame queued, LastQueued = %v", env)
			}
			return
		}
		wantEnv, err := DecodeEnvelope(append([]byte(nil), want...))
		if ok != (err == nil) {
			t.Fatalf("LastQueued ok = %v, decoding the last frame: %v", ok, err)
		}
		if ok && !proto.Equal(env, wantEnv) {
			t.Fatalf("LastQueued = %v, want %v", env, wantEnv)
		}
		// What it answered is its own: the stream's bytes changing later
		// (a receive buffer reused) leave it as it was.
		if ok {
			before := proto.Clone(env)
			for i := range rbuf {
				rbuf[i] ^= 0xff
			}
			if !proto.Equal(env, before) {
				t.Fatal("LastQueued's envelope aliases the stream's receive buffer")
			}
		}
	})
}
