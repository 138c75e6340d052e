package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that sends more after its terminal (broken, or hostile) and is
// then fenced with the answer unread still ended its work at the terminal:
// the lease returns with the first terminal's reason, not node_lost, and
// the holder reads up to that terminal and no further.
func TestFenceAfterFramesPastTheTerminalTakesTheFirstTerminal(t *testing.T) {
	delta := runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA)
	for _, tc := range []struct {
		name  string
		tun   bool
		envs  []*iop.Envelope
		want  ReleaseReason
		reads int
	}{
		{"run complete then a delta", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_START), delta, runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE), delta}, ReasonCompleted, 3},
		{"run error then complete", false, []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_ERROR), runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE)}, ReasonError, 1},
		{"tunnel end then a body", true, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: 200}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}),
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: []byte("data: x\n\n")}),
		}, ReasonCompleted, 2},
		// A frame of no exchange before the terminal fails the holder's
		// read there: the terminal behind it is never reached.
		{"run foreign frame before complete", false, []*iop.Envelope{
			tunnelEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY}),
			runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE),
		}, ReasonNodeLost, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fenceWholeAnswer(t, tc.tun, tc.envs, tc.want, tc.reads)
			if got := metricValue(t, f.reg, "iop_lease_released_total", released("n1", "p", tc.want)); got != 1 {
				t.Fatalf("iop_lease_released_total{reason=%s} = %v, want 1", tc.want, got)
			}
		})
	}
}
