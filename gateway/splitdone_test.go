package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node may split the stream's "data: [DONE]" across two BODY frames at
// any byte. The client that hangs up once it has read it (SDKs do) has
// the whole stream: that is not a cancellation, and the usage and end the
// node sends after are still read.
func TestSplitDoneIsNotACancellation(t *testing.T) {
	const done = "data: [DONE]\n\n"
	e := startEdge(t, fakeNodeConfig(t))
	hungUp := make(chan struct{})
	cut := 0 // set before each request; requests are sequential
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetProviderTunnelRequest().GetRunId()
		frames := []*iop.ProviderTunnelFrame{
			statusFrame(200, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}),
			bodyFrame(chunk(`{"content":"hi"}`, `"stop"`) + done[:cut]),
			bodyFrame(done[cut:]),
		}
		if err := queueFrames(st, runID, 1, frames); err != nil {
			return
		}
		select { // the usage and end come after the client left
		case <-hungUp:
		case <-ctx.Done():
			return
		}
		time.Sleep(50 * time.Millisecond)
		_ = queueFrames(st, runID, 4, []*iop.ProviderTunnelFrame{
			{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Usage: &iop.Usage{PromptTokens: 3, CompletionTokens: 1}},
			endFrame(),
		})
		_ = st.CloseWrite()
	})
	body := `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"go"}]}`
	for cut = 1; cut < len("data: [DONE]"); cut++ {
		conn, br := rawStream(t, e.URL, "/v1/chat/completions", body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("cut %d: no [DONE]: %v", cut, err)
			}
			if strings.HasPrefix(line, "data: [DONE]") {
				break
			}
		}
		_ = conn.Close()
		hungUp <- struct{}{}
		waitReleased(t, e, "vllm-main")
		if got := cancellations(t, e, "client_disconnect"); got != 0 {
			t.Fatalf("cut %d: %v client_disconnect cancellations after a hang-up past [DONE]", cut, got)
		}
	}
	cuts := float64(len("data: [DONE]") - 1)
	if got := metric(t, e.Registry, "iop_tokens_total", map[string]string{"model": "qwen-7b", "kind": "prompt"}); got != 3*cuts {
		t.Errorf("%v prompt tokens counted, want %v: the usage after [DONE] was not read", got, 3*cuts)
	}
	released := map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "completed"}
	if got := metric(t, e.Registry, "iop_lease_released_total", released); got != cuts {
		t.Errorf("%v leases released completed, want %v", got, cuts)
	}
}
