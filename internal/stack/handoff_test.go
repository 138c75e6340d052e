package stack

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testproc"
)

// A cancelled run hands its slot to the next waiter without a gap: the
// lease returns only once the node has stopped the run and freed its own
// capacity slot, even when the CLI ignores SIGTERM and is killed only after
// its kill grace (2.5 s here, longer than the edge's old fixed 2 s drain).
// The waiter queued behind it is served, never refused with 503.
func TestCancelHandOffWithoutGap(t *testing.T) {
	testproc.Shell(t)
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{{
			Name: "agent", Type: "cli", Capacity: 1,
			// The slow prompt ignores SIGTERM and sleeps; any other answers at once.
			Command: []string{"sh", "-c", `if grep -q slow; then trap "" TERM; echo started; sleep 30; else echo fast; fi`},
			Extra:   map[string]any{"kill_grace_ms": 2500},
		}}}},
		Models: []config.ModelSpec{{Name: "agent", QueueTimeoutSec: 30,
			Providers: []config.ModelProvider{{Node: "a", Provider: "agent", Target: "default"}}}},
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "tok-a"})
	e.WaitReady(t, "a", 10*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan struct{})
	// Owner: the test; ends when cancel aborts the request.
	go func() {
		defer close(first)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"agent","stream":true,"messages":[{"role":"user","content":"slow"}]}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	WaitFor(t, 10*time.Second, "the slow run to hold the slot", func() bool {
		return e.Dispatcher.Status().Nodes[0].Providers[0].InFlight == 1
	})
	second := make(chan int, 1)
	// Owner: the test; ends with the second request's answer.
	go func() {
		resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"agent","messages":[{"role":"user","content":"quick"}]}`))
		if err != nil {
			second <- 0
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Logf("second request: %d %s", resp.StatusCode, b)
		}
		second <- resp.StatusCode
	}()
	WaitFor(t, 10*time.Second, "the second request to queue", func() bool {
		return e.Dispatcher.Status().Models[0].Pending == 1
	})
	cancel() // the first client goes away: the run is cancelled
	<-first
	select {
	case code := <-second:
		if code != http.StatusOK {
			t.Fatalf("the waiter got %d, want 200: the slot was handed over before the node freed it", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was never served")
	}
	http.DefaultClient.CloseIdleConnections()
}
