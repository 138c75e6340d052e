package dispatch

import (
	"context"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnel's holder refuses a frame that is not a tunnel frame: a fence
// that finds one queued before the tunnel's END does not look past it, and
// the lease returns node_lost, not completed.
func TestFenceOfTunnelStopsAtAForeignFrame(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, answerWholeThenGo(
		tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200}),
		runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE),
		tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}),
	))
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ts, err := l.OpenTunnel(context.Background(), time.Time{}, &iop.ProviderTunnelRequest{RunId: "run_1"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer at the edge", ts.Ready)
	_ = n.cc.Close()
	waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
	if _, reason := l.Released(); reason != ReasonNodeLost {
		t.Fatalf("a run event before the tunnel's END: released as %q, want %q", reason, ReasonNodeLost)
	}
	if _, err := ts.Recv(); err != nil {
		t.Fatalf("the STATUS frame after the fence: %v", err)
	}
	if _, err := ts.Recv(); err == nil {
		t.Fatal("the tunnel's holder read a run event as a tunnel frame")
	}
	ts.Finish(l, ReasonNodeLost, "", time.Second)
}
