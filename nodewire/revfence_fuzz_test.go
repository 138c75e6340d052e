package nodewire

import (
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// wholeFramesRef is the plain reading of the frames FirstQueued walks: the
// payloads of the frames at the head of unread whose lengths are within
// maxSize and all of whose bytes are there, in order.
func wholeFramesRef(unread []byte, maxSize int) [][]byte {
	var frames [][]byte
	for len(unread) >= frameHeaderLen {
		size := int(binary.BigEndian.Uint32(unread))
		if size > maxSize || len(unread)-frameHeaderLen < size {
			break
		}
		frames = append(frames, unread[frameHeaderLen:frameHeaderLen+size])
		unread = unread[frameHeaderLen+size:]
	}
	return frames
}

// queuedTerminalStop is the stop a fence uses: a run's or a tunnel's
// terminal, or a frame of neither kind.
func queuedTerminalStop(env *iop.Envelope) bool {
	if ev := env.GetRunEvent(); ev != nil {
		return ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_COMPLETE || ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_ERROR
	}
	if f := env.GetProviderTunnelFrame(); f != nil {
		return f.GetEnd() || f.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR
	}
	return true
}

// FirstQueued reads a hostile peer's queued bytes (truncated or huge length
// prefixes, zero-length frames, frames after a terminal, frames over the
// fan-out bound, garbage) without panicking, blocking or consuming
// anything, and answers exactly the first whole frame within the stream's
// limits that stop accepts, none when a frame before it would fail Recv.
func FuzzStreamFirstQueued(f *testing.F) {
	frame := func(env *iop.Envelope) []byte {
		b, err := AppendFrame(nil, env, 0)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	end := frame(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}))
	body := frame(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")}))
	fanned := frame(snapshotsAnswer(scanFanoutAbove)) // over scanFanoutAbove bytes, scanFanoutAbove elements
	f.Add(cat(body, end), 0, 64, 0)
	f.Add(cat(end, []byte{0, 0, 0}), 0, 64, 0)                      // a truncated prefix after it
	f.Add(cat(end, []byte{0xff, 0xff, 0xff, 0xff}), 0, 64, 0)       // a huge length after it
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, 0, 16, 0)                 // zero-length frames
	f.Add(cat(body, end), 3, 8, 0)                                  // frames over the limit
	f.Add(end, 0, len(end)-frameHeaderLen, 0)                       // a frame of exactly the limit
	f.Add(cat(end, body), 0, 64, 0)                                 // a frame after the terminal
	f.Add(cat(body, end, body, end), 0, 64, 0)                      // the first terminal, not the last
	f.Add(cat(body, []byte{0, 0, 0, 2, 0xff, 0xff}, end), 0, 64, 0) // an undecodable frame before it
	f.Add(cat(fanned, end), 0, 1<<20, 1<<10)                        // over the fan-out bound before it
	f.Add(cat(fanned, end), 0, 1<<20, 0)                            // the same, no bound
	f.Fuzz(func(t *testing.T, data []byte, off int, maxSize int, fanout int) {
		if off < 0 || off > len(data) {
			off = 0
		}
		if maxSize <= 0 || maxSize > 1<<20 {
			maxSize = 1 << 20
		}
		rbuf := append([]byte(nil), data...)
		st := &Stream{s: &muxStream{rbuf: rbuf, roff: off}, maxFrame: maxSize, fanout: fanout}
		var seen int
		env, ok := st.FirstQueued(func(env *iop.Envelope) bool { seen++; return queuedTerminalStop(env) })
		if st.s.roff != off || len(st.s.rbuf) != len(data) || string(st.s.rbuf) != string(data) {
			t.Fatal("FirstQueued changed the unread bytes")
		}
		decode := func(payload []byte) *iop.Envelope {
			if fanout > 0 && len(payload) > scanFanoutAbove {
				left := fanout
				if countElements(payload, envelopeDesc, &left) != nil {
					return nil // Recv refuses it
				}
			}
			e, err := DecodeEnvelope(append([]byte(nil), payload...))
			if err != nil {
				return nil
			}
			return e
		}
		var wantEnv *iop.Envelope
		wantSeen := 0
		frames := wholeFramesRef(data[off:], maxSize)
		for i, payload := range frames {
			if i == maxQueuedWalk {
				// Past the walk's bound: the last frame only.
				if e := decode(frames[len(frames)-1]); e != nil {
					wantSeen++
					if queuedTerminalStop(e) {
						wantEnv = e
					}
				}
				break
			}
			e := decode(payload)
			if e == nil {
				break
			}
			wantSeen++
			if queuedTerminalStop(e) {
				wantEnv = e
				break
			}
		}
		if seen != wantSeen {
			t.Fatalf("FirstQueued showed %d frames, want %d", seen, wantSeen)
		}
		if ok != (wantEnv != nil) {
			t.Fatalf("FirstQueued ok = %v, want %v", ok, wantEnv != nil)
		}
		if !ok {
			return
		}
		if !proto.Equal(env, wantEnv) {
			t.Fatalf("FirstQueued = %v, want %v", env, wantEnv)
		}
		// What it answered is its own: the stream's bytes changing later
		// (a receive buffer reused) leave it as it was.
		before := proto.Clone(env)
		for i := range rbuf {
			rbuf[i] ^= 0xff
		}
		if !proto.Equal(env, before) {
			t.Fatal("FirstQueued's envelope aliases the stream's receive buffer")
		}
	})
}
