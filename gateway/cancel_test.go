package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// openStream posts a streaming request and returns the response once the
// first SSE event has been read, with the cancel func of its context.
func openStream(t *testing.T, url, body string) (*http.Response, *bufio.Reader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	got := make(chan error, 1)
	go func() {
		_, err := readEvent(br)
		got <- err
	}()
	if err := waitFor(t, got, waitLong, "the first event"); err != nil {
		t.Fatalf("first event: %v", err)
	}
	return resp, br, cancel
}

// A client leaving mid-stream on the tunnel path cancels the upstream
// request, releases the lease and counts a client_disconnect.
func TestCancelTunnelClientDisconnect(t *testing.T) {
	upstreamGone := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, chunk(`{"role":"assistant","content":""}`, "null"), chunk(`{"content":"Once"}`, "null"))
		select {
		case <-r.Context().Done():
			close(upstreamGone)
		case <-time.After(30 * time.Second): // would be a failure: nobody cancelled
		}
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL())}, modelOn("qwen-7b", "vllm-main", target))
	e, _ := startStack(t, cfg)
	before := cancellations(t, e, "client_disconnect")

	_, _, cancel := openStream(t, e.URL+"/v1/chat/completions", `{"model":"qwen-7b","stream":true,"messages":[{"role":"user","content":"tell a story"}]}`)
	if n := inFlight(e, "vllm-main"); n != 1 {
		t.Fatalf("in_flight %d while streaming, want 1", n)
	}
	cancel()
	waitFor(t, upstreamGone, time.Second, "the upstream request's context to end")
	waitReleased(t, e, "vllm-main")
	stack.WaitFor(t, waitLong, "cancellation counted", func() bool { return cancellations(t, e, "client_disconnect") == before+1 })
	stack.WaitFor(t, waitLong, "lease released as cancelled", func() bool {
		return metric(t, e.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "vllm-main", "reason": "cancelled"}) == 1
	})
}

// The same on the run path: the mock's run context is cancelled (the node
// counts the run as failed long before its 200 ms-per-word answer could
// end), the lease returns and the cancellation is counted.
func TestCancelRunClientDisconnect(t *testing.T) {
	s := mockStack(t, map[string]any{"delay_ms": 200})
	before := cancellations(t, s.Edge, "client_disconnect")
	words := strings.Repeat("word ", 100) // 20 s of deltas

	_, _, cancel := openStream(t, s.URL+"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"`+words+`"}]}`)
	if n := inFlight(s.Edge, "mock"); n != 1 {
		t.Fatalf("in_flight %d while streaming, want 1", n)
	}
	cancel()
	waitReleased(t, s.Edge, "mock")
	stack.WaitFor(t, waitLong, "cancellation counted", func() bool { return cancellations(t, s.Edge, "client_disconnect") == before+1 })
	// Not "error": the node's CANCELLED terminal must not be rendered as the
	// run's failure once the client is gone.
	stack.WaitFor(t, waitLong, "lease released as cancelled", func() bool {
		return metric(t, s.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "mock", "reason": "cancelled"}) == 1
	})

	// The node saw the run end in error (its context was cancelled) and its
	// gate is free again.
	stack.WaitFor(t, waitLong, "the node to record the cancelled run", func() bool {
		u := nodeUsage(t, s.Node)
		return len(u) == 1 && u[0].Requests == 1 && u[0].Errors == 1
	})
	stack.WaitFor(t, waitLong, "the node gate to be free", func() bool {
		snaps := s.Node.Agent.Snapshots(context.Background())
		return len(snaps) == 1 && snaps[0].GetInFlight() == 0
	})
}

// A non-streamed run whose client gives up before the answer: same
// accounting.
func TestCancelRunNonStreamClientDisconnect(t *testing.T) {
	s := mockStack(t, map[string]any{"delay_ms": 200})
	words := strings.Repeat("word ", 100)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	c := httpClient(t)
	go func() {
		_, err := tryDo(ctx, c, http.MethodPost, s.URL+"/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"`+words+`"}]}`, nil)
		done <- err
	}()
	stack.WaitFor(t, waitLong, "the run to start on the node", func() bool {
		u := nodeUsage(t, s.Node)
		return len(u) == 1 && u[0].Requests == 1
	})
	cancel()
	if err := waitFor(t, done, waitLong, "the client to return"); err == nil {
		t.Fatal("request finished despite cancellation")
	}
	waitReleased(t, s.Edge, "mock")
	stack.WaitFor(t, waitLong, "cancellation counted", func() bool { return cancellations(t, s.Edge, "client_disconnect") == 1 })
	stack.WaitFor(t, waitLong, "lease released as cancelled", func() bool {
		return metric(t, s.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "mock", "reason": "cancelled"}) == 1
	})
	stack.WaitFor(t, waitLong, "the node to record the cancelled run", func() bool { return nodeUsage(t, s.Node)[0].Errors == 1 })
}

// A client that disconnects while queued leaves the queue without taking a
// lease.
func TestCancelWhileQueued(t *testing.T) {
	arrived := make(chan struct{}, 2)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	p := vllmProvider("vllm-main", u.baseURL())
	p.Capacity = 1
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{p}, modelOn("qwen-7b", "vllm-main", target)))
	body := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`

	holdCtx, stopHold := context.WithCancel(ctxT(t))
	hold := make(chan error, 1)
	c := httpClient(t)
	go func() {
		_, err := tryDo(holdCtx, c, http.MethodPost, e.URL+"/v1/chat/completions", body, nil)
		hold <- err
	}()
	waitFor(t, arrived, waitLong, "the first request at the upstream")

	qctx, leave := context.WithCancel(ctxT(t))
	queued := make(chan error, 1)
	go func() {
		_, err := tryDo(qctx, c, http.MethodPost, e.URL+"/v1/chat/completions", body, nil)
		queued <- err
	}()
	stack.WaitFor(t, waitLong, "the second request queued", func() bool { return e.Dispatcher.Status().Models[0].Pending == 1 })
	leave()
	waitFor(t, queued, waitLong, "the queued client to return")
	stack.WaitFor(t, waitLong, "the queue to empty", func() bool { return e.Dispatcher.Status().Models[0].Pending == 0 })
	if n := inFlight(e, "vllm-main"); n != 1 {
		t.Errorf("in_flight %d, want 1 (only the holder)", n)
	}
	stopHold()
	waitFor(t, hold, waitLong, "the holder to return")
	waitReleased(t, e, "vllm-main")
	if len(u.requests()) != 1 {
		t.Errorf("upstream saw %d requests, want 1", len(u.requests()))
	}
}

type adapterUsage struct {
	Adapter  string `json:"adapter"`
	Requests int64  `json:"requests"`
	Errors   int64  `json:"errors"`
}

// nodeUsage runs the node's usage command locally.
func nodeUsage(t *testing.T, n *stack.Node) []adapterUsage {
	t.Helper()
	resp := n.Agent.Command(context.Background(), "usage")
	var out struct {
		Adapters []adapterUsage `json:"adapters"`
	}
	if err := json.Unmarshal(resp.GetPayloadJson(), &out); err != nil {
		t.Fatalf("usage payload %s: %v", resp.GetPayloadJson(), err)
	}
	return out.Adapters
}
