package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// rawExchange sends one POST over its own connection and returns the raw
// bytes of everything the edge sent back until it closed.
func rawExchange(t *testing.T, url, path, body string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitLong))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, len(body), body)
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer: %v (so far %q)", err, out)
	}
	return string(out)
}

// A 1xx is never a final status: the edge answers 502 rather than relaying
// it as an interim response followed by a 200 of its own, or as a 101
// protocol switch. A 204 or 304 is relayed without the body a node sent
// with it, and counts as a completed answer, not as a write_error.
func TestTunnelStatusWithoutFinalAnswerOrBody(t *testing.T) {
	var status int32
	sse := false // requests are sequential
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, answering(func(*iop.ProviderTunnelRequest) []*iop.ProviderTunnelFrame {
		if sse {
			return []*iop.ProviderTunnelFrame{statusFrame(status, &iop.Header{Name: "Content-Type", Value: "text/event-stream"}),
				bodyFrame("data: {}\n\n"), endFrame()}
		}
		return []*iop.ProviderTunnelFrame{statusFrame(status, jsonType), bodyFrame(vllmChatJSON), endFrame()}
	}))
	requests := []string{
		`{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	}
	for _, code := range []int32{100, 101, 103, 199} {
		for _, sse = range []bool{false, true} {
			status = code
			for _, body := range requests {
				out := rawExchange(t, e.URL, "/v1/chat/completions", body)
				if !strings.HasPrefix(out, "HTTP/1.1 502 ") || strings.Count(out, "HTTP/1.1 ") != 1 {
					t.Errorf("status %d (sse=%v) answered:\n%q\nwant one 502", code, sse, out)
				}
			}
		}
	}
	for _, code := range []int32{204, 304} {
		for _, sse = range []bool{false, true} {
			status = code
			for _, body := range requests {
				out := rawExchange(t, e.URL, "/v1/chat/completions", body)
				resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
				if err != nil || resp.StatusCode != int(code) {
					t.Fatalf("status %d (sse=%v) answered %q: %v", code, sse, out, err)
				}
				if cl := resp.Header.Get("Content-Length"); cl != "" {
					t.Errorf("status %d (sse=%v) relayed with Content-Length %s", code, sse, cl)
				}
			}
		}
	}
	waitReleased(t, e, "vllm-main")
	if got := cancellations(t, e, "write_error"); got != 0 {
		t.Errorf("write_error cancellations = %v after answers the clients read whole, want 0", got)
	}
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "tunnel", "code": "cancelled"}); got != 0 {
		t.Errorf("%v requests counted as cancelled, want 0", got)
	}
}
