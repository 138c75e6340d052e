package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An exchange the edge gives up before the answer's end without a client
// cancellation — here a head it refuses to relay — still cancels the run
// on the node and hands the lease back only once the node has stopped it:
// a lease returned while the node still runs the request would send the
// next one to a node whose own gate is full.
func TestAbandonedTunnelWaitsForNodeToStop(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	const stopping = 300 * time.Millisecond
	var stoppedAt atomic.Int64 // unix nanos when the node sent its terminal
	cancels := make(chan *iop.CancelRequest, 1)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetProviderTunnelRequest().GetRunId()
		var hs []*iop.Header
		for i := range 65 { // one more than the edge relays
			hs = append(hs, &iop.Header{Name: fmt.Sprintf("X-H%d", i), Value: "v"})
		}
		if err := queueFrames(st, runID, 1, []*iop.ProviderTunnelFrame{statusFrame(200, hs...)}); err != nil {
			return
		}
		for {
			env, err := st.Recv()
			if err != nil {
				return // the stream ended without a cancel
			}
			if c := env.GetCancelRequest(); c != nil {
				cancels <- c
				time.Sleep(stopping) // the upstream request takes this to stop
				stoppedAt.Store(time.Now().UnixNano())
				_ = queueFrames(st, runID, 2, []*iop.ProviderTunnelFrame{endFrame()})
				_ = st.CloseWrite()
				return
			}
		}
	})
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	back := leaseBack(t, e, "vllm-main")
	var c *iop.CancelRequest
	select {
	case c = <-cancels:
	case <-time.After(waitLong):
		t.Fatal("the node never received a CancelRequest for the refused answer")
	}
	if c.GetReason() != "abandoned" {
		t.Errorf("cancel reason %q, want abandoned", c.GetReason())
	}
	if at := stoppedAt.Load(); at == 0 || back.UnixNano() < at {
		t.Errorf("lease back before the node stopped the run")
	}
}
