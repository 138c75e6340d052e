package nodeagent

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Every frame the sink sends shares its envelope (encoded before Send and
// Queue return): queueing a frame allocates nothing of the sink's, the
// frame is let go of once encoded, and the edge gets each frame as it was
// sent, stamped in order.
func TestTunnelSinkFramesShareTheEnvelope41(t *testing.T) {
	edge, node := watchedStream(t)
	sink := &tunnelSink{st: node, runID: "r1", stats: &usageStats{}}
	if err := sink.Status(200, map[string][]string{"Content-Type": {"application/json"}}); err != nil {
		t.Fatal(err)
	}
	usage := &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Usage: &iop.Usage{PromptTokens: 3}}
	const queued = 50
	if n := testing.AllocsPerRun(queued-1, func() {
		if err := sink.queue(usage); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("queueing a frame: %v allocations, want 0", n)
	}
	if sink.bodyEnv.ProviderTunnelFrame != nil {
		t.Error("the sink still holds the last frame it sent")
	}
	if err := sink.send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}); err != nil {
		t.Fatal(err)
	}
	_ = edge.SetReadDeadline(time.Now().Add(10 * time.Second))
	for seq := uint64(1); seq <= queued+2; seq++ {
		env, err := edge.Recv()
		if err != nil {
			t.Fatalf("frame %d: %v", seq, err)
		}
		f := env.GetProviderTunnelFrame()
		want := &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Usage: &iop.Usage{PromptTokens: 3}, Sequence: seq, RunId: "r1"}
		switch seq {
		case 1:
			want = &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200, Sequence: 1, RunId: "r1",
				Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}}}
		case queued + 2:
			want = &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true, Sequence: seq, RunId: "r1"}
		}
		if !proto.Equal(f, want) {
			t.Fatalf("frame %d: %v, want %v", seq, f, want)
		}
	}
}
