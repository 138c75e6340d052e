package stack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
)

// A provider whose backend the node reports offline (vLLM /health failing)
// takes no new leases; when it recovers, queued requests are served.
func TestOfflineBackendIsNotDispatched(t *testing.T) {
	var healthy atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			if !healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		case "/metrics":
			_, _ = w.Write([]byte("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer up.Close()
	e := StartEdge(t, &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "ta", Providers: []config.ProviderSpec{
			{Name: "v", Type: "vllm", BaseURL: up.URL + "/v1", Capacity: 2},
		}}},
		Models: []config.ModelSpec{{Name: "demo", QueueTimeoutSec: 20, Providers: []config.ModelProvider{{Node: "a", Provider: "v", Target: "x"}}}},
	}, EdgeOptions{HealthInterval: 50 * time.Millisecond})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	e.WaitReady(t, "a", 10*time.Second)
	snap := func() *dispatch.ProviderStatus { return e.Dispatcher.Status().Nodes[0].Providers[0] }
	WaitFor(t, 10*time.Second, "offline health", func() bool { return snap().Health == "offline" })
	if s := snap(); s.Status != "unavailable" {
		t.Fatalf("offline provider shown as %s", s.Status)
	}
	if e.Dispatcher.Dispatchable() {
		t.Fatal("readyz would report ready with only an offline provider")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := e.Dispatcher.Acquire(ctx, dispatch.Request{Model: "demo"})
		if err == nil {
			l.Release(dispatch.ReasonCompleted)
		}
		got <- err
	}()
	WaitFor(t, 5*time.Second, "the request to queue", func() bool { return e.Dispatcher.Status().Models[0].Pending == 1 })
	healthy.Store(true)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("queued request not served after the backend recovered")
	}
	if s := snap(); s.Health != "ok" || s.Status != "available" {
		t.Fatalf("after recovery: %+v", s)
	}
}
