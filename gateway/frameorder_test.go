package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnel's STATUS frame comes first and exactly once (runtime.proto). A
// node that sends a second one relays two upstream answers as one (say, a
// retry after part of the first): the edge fails the exchange rather than
// hand the client the two bodies joined. A held answer is a 502 envelope
// without a byte of either body, an event stream ends with an error event
// and no [DONE], a plain body relayed as it came is cut.
func TestTunnelSecondStatusFailsTheExchange(t *testing.T) {
	sseType := &iop.Header{Name: "Content-Type", Value: "text/event-stream"}
	sse := false // requests are sequential
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		if sse {
			return []*iop.ProviderTunnelFrame{statusFrame(200, sseType), bodyFrame(chunk(`{"content":"first"}`, "null")),
				statusFrame(200, sseType), bodyFrame(chunk(`{"content":"second"}`, `"stop"`) + sseDone), endFrame()}
		}
		return []*iop.ProviderTunnelFrame{statusFrame(200, jsonType), bodyFrame(vllmChatJSON[:40]),
			statusFrame(200, jsonType), bodyFrame(vllmChatJSON), endFrame()}
	}))
	whole := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`
	stream := `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	r := post(t, e, "/v1/chat/completions", whole)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	if strings.Contains(string(r.Body), "chatcmpl") {
		t.Errorf("part of a body reached the client: %s", r.Body)
	}
	waitReleased(t, e, "vllm-main")

	sse = true
	r = post(t, e, "/v1/chat/completions", stream)
	events := readEvents(t, r.Body)
	if r.Status != http.StatusOK || len(events) != 2 || !strings.HasPrefix(events[1], `{"error":`) {
		t.Fatalf("stream: status %d, events %q: want the first chunk, then an error event", r.Status, events)
	}
	waitReleased(t, e, "vllm-main")

	// Asked as a stream, answered as JSON: relayed as it comes, so cut.
	sse = false
	if _, err := tryDo(ctxT(t), httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", stream, nil); err == nil {
		t.Error("a plain body relayed as it came ended cleanly after a second STATUS")
	}
	waitReleased(t, e, "vllm-main")
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "502"}); got != 3 {
		t.Errorf("requests counted 502: %v, want 3", got)
	}
}
