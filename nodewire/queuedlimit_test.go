package nodewire

import (
	"encoding/binary"
	"errors"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A queued frame over the stream's fan-out bound is refused by FirstQueued
// as Recv refuses it: nothing is decoded from it, and nothing behind it is
// reached (the reader fails there).
func TestFirstQueuedHoldsFramesToTheFanoutBound(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil { // the STATUS frame lentPair sends
		t.Fatal(err)
	}
	// 65,536 empty snapshots: 128 KiB on the wire (whole within the
	// window, over scanFanoutAbove), 65,536 elements against a bound of
	// 1,024.
	recv.fanout = 1 << 10
	if err := send.Queue(snapshotsAnswer(scanFanoutAbove)); err != nil {
		t.Fatal(err)
	}
	if err := send.Queue(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true})); err != nil {
		t.Fatal(err)
	}
	if err := send.Flush(); err != nil {
		t.Fatal(err)
	}
	fanned, err := AppendFrame(nil, snapshotsAnswer(scanFanoutAbove), 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both frames at the receiver", func() bool { return unreadLen(recv) > len(fanned) })
	if env, ok := recv.FirstQueued(func(*iop.Envelope) bool { return true }); ok {
		t.Fatalf("a frame over the fan-out bound: FirstQueued = %T, want none", env.GetBody())
	}
	if env, ok := recv.FirstQueued(tunnelEnded); ok {
		t.Fatalf("an END behind a frame over the fan-out bound: FirstQueued = %v, want none", env)
	}
	if _, err := recv.Recv(); !errors.Is(err, errFanout) {
		t.Fatalf("Recv of the same frame: %v, want errFanout", err)
	}
}

// A peer that sends more after its terminal does not hide it: the first
// terminal queued is the one found, and the frames after it are still
// there for the reader, unread.
func TestFirstQueuedFindsATerminalNotLast(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil {
		t.Fatal(err)
	}
	for i, f := range []*iop.ProviderTunnelFrame{
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, Body: []byte("data: x\n\n")},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 3, End: true},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 4, Body: []byte("data: y\n\n")},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 5, End: true},
	} {
		if err := send.Queue(tunnelFrameEnv(f)); err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
	}
	if err := send.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := 0
	waitFor(t, "the backlog at the receiver", func() bool {
		seen = 0
		_, ok := recv.FirstQueued(func(env *iop.Envelope) bool { seen++; return false })
		return !ok && seen == 4
	})
	env, ok := recv.FirstQueued(tunnelEnded)
	if !ok || env.GetProviderTunnelFrame().GetSequence() != 3 {
		t.Fatalf("FirstQueued = %v, %v: want the first END (sequence 3)", env, ok)
	}
	for want := uint64(2); want <= 5; want++ {
		env, err := recv.Recv()
		if err != nil {
			t.Fatalf("frame %d: %v", want, err)
		}
		if got := env.GetProviderTunnelFrame().GetSequence(); got != want {
			t.Fatalf("read frame %d, want %d", got, want)
		}
	}
}

// Past maxQueuedWalk frames the walk decodes only the last one: a backlog
// of a node's chunks ending with its terminal still finds the terminal
// (one decode for the rest, however many there are), and a frame after it
// there hides it (as before the walk existed).
func TestFirstQueuedPastTheWalkBoundLooksAtTheLast(t *testing.T) {
	for _, after := range []bool{false, true} {
		send, recv := lentPair(t)
		if _, err := recv.Recv(); err != nil {
			t.Fatal(err)
		}
		frames := maxQueuedWalk + 10
		for i := range frames {
			if err := send.Queue(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: uint64(i), Body: []byte("data: x\n\n")})); err != nil {
				t.Fatal(err)
			}
		}
		if err := send.Queue(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true})); err != nil {
			t.Fatal(err)
		}
		frames++
		if after {
			if err := send.Queue(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("x")})); err != nil {
				t.Fatal(err)
			}
			frames++
		}
		if err := send.Flush(); err != nil {
			t.Fatal(err)
		}
		seen := 0
		waitFor(t, "the backlog at the receiver", func() bool {
			recv.s.mu.Lock()
			unread := recv.s.rbuf[recv.s.roff:]
			n := 0
			for rest := unread; len(rest) > 0 && wholeFramesLen(rest, recv.maxFrame) > 0; n++ {
				rest = rest[frameHeaderLen+int(binary.BigEndian.Uint32(rest)):]
			}
			recv.s.mu.Unlock()
			return n == frames
		})
		env, ok := recv.FirstQueued(func(env *iop.Envelope) bool { seen++; return tunnelEnded(env) })
		if want := maxQueuedWalk + 1; seen != want {
			t.Fatalf("after=%v: stop saw %d frames, want %d (the walk's bound and the last)", after, seen, want)
		}
		if ok == after || (ok && !env.GetProviderTunnelFrame().GetEnd()) {
			t.Fatalf("after=%v: FirstQueued = %v, %v", after, env, ok)
		}
	}
}
