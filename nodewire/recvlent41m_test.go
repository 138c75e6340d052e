package nodewire

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestRecvLentNonBodyFramesOwnTheirBytes41m: RecvLent decodes a tunnel
// frame other than BODY straight from the receive buffer, which the next
// frame reuses. Such a frame may still carry bytes (a body beside END or
// ERROR, or a kind this build does not know): they must be copied out,
// not left pointing into the buffer, which the fast decoder would do.
func TestRecvLentNonBodyFramesOwnTheirBytes41m(t *testing.T) {
	poisonRecvBufsFor(t)
	send, recv := lentPair(t)
	next := lentNext(t, recv)
	if next().GetProviderTunnelFrame().GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		t.Fatal("first frame is not the STATUS frame")
	}
	var kept, want []*iop.Envelope
	seq := uint64(2)
	for _, kind := range []iop.TunnelFrameKind{
		iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END,
		iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR,
		iop.TunnelFrameKind_TUNNEL_FRAME_KIND_UNSPECIFIED,
		iop.TunnelFrameKind(42),
	} {
		env := tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: kind, Sequence: seq, RunId: "run_1",
			Body: bytes.Repeat([]byte(fmt.Sprintf("kind %d;", kind)), 200)})
		seq++
		if err := send.Send(env); err != nil {
			t.Fatal(err)
		}
		kept, want = append(kept, next()), append(want, env)
		// BODY frames of the same size class reuse the buffer.
		for range 3 {
			if err := send.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: seq,
				Body: bytes.Repeat([]byte("b"), 1600)})); err != nil {
				t.Fatal(err)
			}
			seq++
			_ = next()
		}
	}
	for i := range kept {
		if !proto.Equal(kept[i], want[i]) {
			t.Fatalf("frame %d changed once later frames came: body %.40q, want %.40q", i,
				kept[i].GetProviderTunnelFrame().GetBody(), want[i].GetProviderTunnelFrame().GetBody())
		}
	}
}
