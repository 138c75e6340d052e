package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Behind a stream's [DONE] the wait for the node's END is bounded by the
// cancel grace also when the stream idle timeout is longer: a node that
// goes silent after [DONE] holds the client's answer and the lease for
// about the grace (here shortGrace), not for the idle timeout (600 s):
// without the bound, the waits below reach their deadline, far below it.
func TestDoneWaitCappedByGraceUnderLongIdle(t *testing.T) {
	cfg := fakeNodeConfig(t)
	long := 600
	cfg.Limits.StreamIdleTimeoutSec = &long
	e := startEdgeShortGrace(t, cfg)
	n := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		req := first.GetProviderTunnelRequest()
		frames := []*iop.ProviderTunnelFrame{statusFrame(200, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}),
			bodyFrame(chunk(`{"content":"hi"}`, `"stop"`)), bodyFrame(sseDone)}
		for i, f := range frames {
			f.Sequence, f.RunId = uint64(i+1), req.GetRunId()
			if st.Send(tunnelFrameEnv(f)) != nil {
				return
			}
		}
		silent(n, ctx, st, nil)
	})
	start := time.Now()
	ch := postAsync(t, e, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	// The grace and then Finish's own grace take about 2*shortGrace; the
	// deadline is only a loaded machine's margin over it, and far below
	// the 600 s idle timeout the stream would wait without the bound.
	r := waitFor(t, ch, waitLong, "the stream to end within the cancel grace")
	if r.Status != http.StatusOK || !strings.HasSuffix(string(r.Body), sseDone) {
		t.Fatalf("status %d, body %q: want a 200 ending with [DONE]", r.Status, r.Body)
	}
	stack.WaitFor(t, waitLong, "the lease to return", func() bool { return inFlight(e, "vllm-main") == 0 })
	if c := n.nextCancel(t); c.GetReason() != "abandoned" {
		t.Errorf("CancelRequest reason %q, want abandoned", c.GetReason())
	}
	t.Logf("answer and lease back after %v", time.Since(start).Round(time.Millisecond))
}
