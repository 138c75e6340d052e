package nodewire

import (
	"encoding/binary"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fenceBacklogStreams are streams each holding perStream bytes of whole,
// unread frames of env (nothing ends the exchange), as a lost node's
// exchanges hold them when their holders lag: what one fence walks.
func fenceBacklogStreams(tb testing.TB, streams, perStream int, env *iop.Envelope) []*Stream {
	tb.Helper()
	one, err := AppendFrame(nil, env, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var backlog []byte
	for len(backlog)+len(one) <= perStream {
		backlog = append(backlog, one...)
	}
	sts := make([]*Stream, streams)
	for i := range sts {
		sts[i] = &Stream{s: &muxStream{rbuf: append([]byte(nil), backlog...)}, maxFrame: 1 << 20, fanout: 1 << 16}
	}
	return sts
}

// benchFenceWalk is dispatch's fenceQueuedWalk: the frames a fence decodes
// from the first, shared out between its exchanges.
const benchFenceWalk = 1024

// One fence of a node whose exchanges together hold the session's bound
// of unread bytes (muxMaxBuffered): the time the dispatcher's lock is
// held walking them.
func BenchmarkFirstQueuedFence(b *testing.B) {
	for _, c := range []struct {
		name    string
		streams int
		env     *iop.Envelope
	}{
		{"1000leases/deltas", 1000, runDeltaEnv(7, "some text of a chunk")},
		{"1000leases/body4KiB", 1000, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, Body: make([]byte, 4<<10)})},
		{"512leases/body32KiB", 512, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, Body: make([]byte, 32<<10)})},
	} {
		b.Run(c.name, func(b *testing.B) {
			sts := fenceBacklogStreams(b, c.streams, min(muxWindow, muxMaxBuffered/c.streams), c.env)
			walk := benchFenceWalk / len(sts)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, st := range sts {
					if _, ok := st.FirstQueuedWithin(queuedTerminalStop, walk); ok {
						b.Fatal("a terminal in a backlog of chunks")
					}
				}
			}
		})
	}
}

// wholeFramesLen is the length of the longest prefix of unread made of
// whole frames each within maxSize (see maxFrame), walked by their length
// prefixes only.
func wholeFramesLen(unread []byte, maxSize int) int {
	n := 0
	for rest := unread; len(rest) >= frameHeaderLen; {
		size := binary.BigEndian.Uint32(rest)
		if uint64(size) > uint64(maxFrame(maxSize)) || uint64(len(rest)-frameHeaderLen) < uint64(size) {
			break
		}
		n += frameHeaderLen + int(size)
		rest = rest[frameHeaderLen+int(size):]
	}
	return n
}
