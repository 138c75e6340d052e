package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnel ERROR frame after the first byte of a stream was relayed ends
// the event stream with one error event (no [DONE]) carrying the node's
// message, or a generic one when the node gave none; the request counts as
// a 502 and not as a cancellation.
func TestTunnelErrorAfterFirstByteText(t *testing.T) {
	for _, c := range []struct{ name, msg, want string }{
		{"message", "upstream connection reset", "upstream connection reset"},
		// A message that looks like SSE framing stays inside one event.
		{"framing in message", "reset\n\ndata: [DONE]\n\n", "reset\n\ndata: [DONE]\n\n"},
		{"no message", "", "The provider stream failed."},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startEdge(t, fakeNodeConfig(t))
			startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
				return []*iop.ProviderTunnelFrame{statusFrame(200, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}),
					bodyFrame(chunk(`{"content":"hi"}`, "null")),
					{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true,
						Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: c.msg}}}
			}))
			r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			events := readEvents(t, r.Body)
			if r.Status != http.StatusOK || len(events) != 2 {
				t.Fatalf("status %d, events %q: want the chunk, then one error event", r.Status, events)
			}
			var env struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(events[1]), &env); err != nil {
				t.Fatalf("error event %q: %v", events[1], err)
			}
			if env.Error.Message != c.want || env.Error.Type != "server_error" || env.Error.Code != "upstream_error" {
				t.Errorf("error event %+v, want message %q, server_error, upstream_error", env.Error, c.want)
			}
			if strings.Contains(string(r.Body), "\ndata: [DONE]\n") {
				t.Errorf("a [DONE] event followed the error: %q", r.Body)
			}
			waitReleased(t, e, "vllm-main")
			if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "502"}); got != 1 {
				t.Errorf("requests counted 502: %v, want 1", got)
			}
			for _, reason := range []string{"timeout", "client_disconnect", "write_error"} {
				if got := cancellations(t, e, reason); got != 0 {
					t.Errorf("%s cancellations = %v, want 0", reason, got)
				}
			}
		})
	}
}

// The same after the first byte of a body that is not an event stream
// (a JSON answer relayed as it comes because a stream was asked for): the
// connection is broken rather than the body ended cleanly, so the client
// cannot take the cut body for a whole one; counted as a 502.
func TestTunnelErrorAfterFirstByteBreaksPlainBody(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		return []*iop.ProviderTunnelFrame{statusFrame(200, &iop.Header{Name: "Content-Type", Value: "application/json"}),
			bodyFrame(`{"id":"chatcmpl-1","choices":[`),
			{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true,
				Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "upstream connection reset"}}}
	}))
	r, err := tryDo(ctxT(t), httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions",
		`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if err == nil {
		t.Fatalf("the cut body ended cleanly: status %d, body %q", r.Status, r.Body)
	}
	waitReleased(t, e, "vllm-main")
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "502"}); got != 1 {
		t.Errorf("requests counted 502: %v, want 1", got)
	}
}
