package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// requestsByCode sums iop_requests_total by its code label.
func requestsByCode(t *testing.T, e *stack.Edge) map[string]float64 {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "iop_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// A client that goes away while sending its body is counted as cancelled,
// not as a 400 it got wrong; one that sends it too slowly gets a 408
// request_timeout, not a 400 saying the body could not be read.
func TestBodyAbortAndTimeoutAreTheirOwnOutcomes(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("m", nil)}, modelOn("m-echo", "m", "echo"))
	cfg.Limits.ReadTimeoutSec = 1
	e := startEdge(t, cfg)
	addr := strings.TrimPrefix(e.URL, "http://")

	// Gone: 10 of the 1,000 bytes it declared, then its side closed.
	c := rawConn(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":\"")
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	_, _ = io.Copy(io.Discard, c)
	stack.WaitFor(t, waitLong, "the abandoned request to be counted", func() bool { return requestsByCode(t, e)["cancelled"] == 1 })
	if got := requestsByCode(t, e)["400"]; got != 0 {
		t.Fatalf("a body the client abandoned counted as %v 400s", got)
	}

	// Too slow: the same, left open past read_timeout_sec.
	c = rawConn(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":\"")
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that timed out: %v", err)
	}
	defer resp.Body.Close()
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode != http.StatusRequestTimeout || json.NewDecoder(resp.Body).Decode(&env) != nil || env.Error.Code != "request_timeout" {
		t.Fatalf("status %d, code %q; want 408 request_timeout", resp.StatusCode, env.Error.Code)
	}
	stack.WaitFor(t, waitLong, "the timed-out request to be counted", func() bool { return requestsByCode(t, e)["408"] == 1 })
}
