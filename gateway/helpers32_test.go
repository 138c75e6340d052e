package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Helpers that tests on every system share with the Linux-only ones
// (flush_linux_test.go: TCP_INFO; statuspage_test.go: Debian's Chromium):
// kept out of those files so that the package builds elsewhere.

// pageAdminToken is the admin token of pageStack's edge.
const pageAdminToken = "adm-page-token-4d2e"

// pageStack is an edge with one mock provider of capacity 1 serving
// "demo", and a node; its admin token is pageAdminToken.
func pageStack(t *testing.T, settings map[string]any) *stack.Edge {
	t.Helper()
	e, _ := pageStackNode(t, settings)
	return e
}

// pageStackNode is pageStack with its node.
func pageStackNode(t *testing.T, settings map[string]any) (*stack.Edge, *stack.Node) {
	t.Helper()
	p := mockProvider("mock", settings)
	p.Capacity, p.LongCapacity = 1, 1
	m := modelOn("demo", "mock", "mock-echo")
	// Longer than go test's default timeout (10 minutes): a request the
	// page is to show queued leaves the queue only when its test ends it.
	m.QueueTimeoutSec = 600
	cfg := edgeConfig([]config.ProviderSpec{p}, m)
	cfg.Auth.AdminToken = pageAdminToken
	// Offline after the grace, a request would fail at once instead of
	// waiting for the page to show it.
	cfg.Models[0].OfflineGraceSec = new(float64)
	return startStack(t, cfg)
}

// queueFrames queues frames on st (sequences from seq, run id set) and
// sends them in one write.
func queueFrames(st *nodewire.Stream, runID string, seq uint64, frames []*iop.ProviderTunnelFrame) error {
	for i, f := range frames {
		f.Sequence, f.RunId = seq+uint64(i), runID
		if err := st.Queue(tunnelFrameEnv(f)); err != nil {
			return err
		}
	}
	return st.Flush()
}

// rawStream posts body to the edge's path over a connection of its
// own and returns it with a reader at the start of the (de-chunked) body.
func rawStream(t *testing.T, base, path, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, waitLong)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(waitLong))
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, u.Host, len(body), body)
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return conn, bufio.NewReader(resp.Body)
}

// readRest reads br to its end.
func readRest(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var sb strings.Builder
	if _, err := br.WriteTo(&sb); err != nil {
		t.Fatalf("reading the stream's end: %v", err)
	}
	return sb.String()
}
