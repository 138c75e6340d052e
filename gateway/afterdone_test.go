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

// Once the client has a stream's [DONE] it has its whole answer. A node
// that then never sends the END (here with no idle timeout) holds neither
// the handler nor the lease beyond the cancel grace, and an ERROR after
// [DONE] is not appended to the finished stream nor counted as a failure.
func TestNothingFollowsDone(t *testing.T) {
	for _, after := range []string{"silence", "error"} {
		t.Run(after, func(t *testing.T) {
			cfg := fakeNodeConfig(t)
			none := 0
			cfg.Limits.StreamIdleTimeoutSec = &none
			e := startEdgeShortGrace(t, cfg)
			n := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
				req := first.GetProviderTunnelRequest()
				frames := []*iop.ProviderTunnelFrame{statusFrame(200, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}),
					bodyFrame(chunk(`{"content":"hi"}`, `"stop"`)), bodyFrame(sseDone)}
				if after == "error" {
					frames = append(frames, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true,
						Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "upstream connection reset"}})
				}
				for i, f := range frames {
					f.Sequence, f.RunId = uint64(i+1), req.GetRunId()
					if st.Send(tunnelFrameEnv(f)) != nil {
						return
					}
				}
				if after == "error" {
					_ = st.CloseWrite()
				}
				silent(n, ctx, st, nil)
			})
			ch := postAsync(t, e, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			r := waitFor(t, ch, 25*time.Second, "the stream to end")
			if r.Status != http.StatusOK || !strings.HasSuffix(string(r.Body), sseDone) {
				t.Fatalf("status %d, body %q: want a 200 ending with [DONE]", r.Status, r.Body)
			}
			stack.WaitFor(t, 25*time.Second, "the lease to return", func() bool { return inFlight(e, "vllm-main") == 0 })
			if after == "silence" {
				if c := n.nextCancel(t); c.GetReason() != "abandoned" {
					t.Errorf("CancelRequest reason %q, want abandoned", c.GetReason())
				}
			}
			for _, reason := range []string{"timeout", "client_disconnect", "write_error"} {
				if got := cancellations(t, e, reason); got != 0 {
					t.Errorf("%s cancellations = %v, want 0", reason, got)
				}
			}
			if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "200"}); got != 1 {
				t.Errorf("requests counted 200: %v, want 1", got)
			}
		})
	}
}

// A model that writes "data: [DONE]" into its text has not ended its
// stream: a failure after it still reaches the client as an error event.
func TestDoneInTextIsNotTheEnd(t *testing.T) {
	cfg := fakeNodeConfig(t)
	none := 0
	cfg.Limits.StreamIdleTimeoutSec = &none
	e := startEdge(t, cfg)
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}),
			bodyFrame(chunk(`{"content":"data: [DONE]"}`, "null")),
			{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true,
				Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "upstream connection reset"}}}
	}))
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	events := readEvents(t, r.Body)
	if r.Status != http.StatusOK || len(events) != 2 || !strings.HasPrefix(events[1], `{"error":`) {
		t.Fatalf("status %d, events %q: want the chunk, then an error event", r.Status, events)
	}
	waitReleased(t, e, "vllm-main")
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "502"}); got != 1 {
		t.Errorf("requests counted 502: %v, want 1", got)
	}
}
