package nodewire

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// LastQueued decodes the last whole frame among the unread ones and
// consumes nothing: every frame is still read, in order, afterwards; with
// nothing queued it reports none.
func TestStreamLastQueued(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil { // the STATUS frame lentPair sends
		t.Fatal(err)
	}
	if env, ok := recv.LastQueued(); ok {
		t.Fatalf("nothing queued: LastQueued = %v, want none", env)
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
		env, ok := recv.LastQueued()
		last = env
		return ok && env.GetProviderTunnelFrame().GetSequence() == 4
	})
	if f := last.GetProviderTunnelFrame(); f.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END || !f.GetEnd() {
		t.Fatalf("LastQueued = %v, want the END frame", f)
	}
	for want := uint64(2); want <= 4; want++ {
		env, err := recv.RecvLent()
		if err != nil {
			t.Fatalf("frame %d: %v", want, err)
		}
		if got := env.GetProviderTunnelFrame().GetSequence(); got != want {
			t.Fatalf("read frame %d, want %d: LastQueued consumed something", got, want)
		}
	}
	if env, ok := recv.LastQueued(); ok {
		t.Fatalf("all read: LastQueued = %v, want none", env)
	}
}
