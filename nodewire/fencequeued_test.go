package nodewire

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// tunnelEnded is a FirstQueued stop: the tunnel's END frame.
func tunnelEnded(env *iop.Envelope) bool { return env.GetProviderTunnelFrame().GetEnd() }

// FirstQueued decodes the unread frames in order up to the first one it is
// asked for, and consumes nothing: every frame is still read, in order,
// afterwards; with nothing queued it reports none.
func TestStreamFirstQueued(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil { // the STATUS frame lentPair sends
		t.Fatal(err)
	}
	if env, ok := recv.FirstQueued(tunnelEnded); ok {
		t.Fatalf("nothing queued: FirstQueued = %v, want none", env)
	}
	big := make([]byte, 40<<10) // a frame larger than one receive buffer class
	for i, f := range []*iop.ProviderTunnelFrame{
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, Body: []byte("data: x\n\n")},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, Body: big},
		{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 4, End: true},
	} {
		if err := send.Queue(tunnelFrameEnv(f)); err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
	}
	if err := send.Flush(); err != nil {
		t.Fatal(err)
	}
	// Wait until the whole backlog is at the receiver: its last frame is
	// the END one.
	var last *iop.Envelope
	waitFor(t, "the backlog at the receiver", func() bool {
		env, ok := recv.FirstQueued(tunnelEnded)
		last = env
		return ok && env.GetProviderTunnelFrame().GetSequence() == 4
	})
	if f := last.GetProviderTunnelFrame(); f.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END || !f.GetEnd() {
		t.Fatalf("FirstQueued = %v, want the END frame", f)
	}
	if env, ok := recv.FirstQueued(func(*iop.Envelope) bool { return true }); !ok || env.GetProviderTunnelFrame().GetSequence() != 2 {
		t.Fatalf("FirstQueued of any frame = %v, %v: want the first one queued", env, ok)
	}
	for want := uint64(2); want <= 4; want++ {
		env, err := recv.RecvLent()
		if err != nil {
			t.Fatalf("frame %d: %v", want, err)
		}
		if got := env.GetProviderTunnelFrame().GetSequence(); got != want {
			t.Fatalf("read frame %d, want %d: FirstQueued consumed something", got, want)
		}
	}
	if env, ok := recv.FirstQueued(tunnelEnded); ok {
		t.Fatalf("all read: FirstQueued = %v, want none", env)
	}
}
