package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// requestsWithCode is iop_requests_total summed over the series of code.
func requestsWithCode(t *testing.T, e *stack.Edge, code string) float64 {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "iop_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// A client that leaves while its request waits in the queue is counted as
// cancelled, not as the 200 net/http would log for an answer never
// written.
func TestQueuedClientLeavingCountedCancelled(t *testing.T) {
	arrived := make(chan struct{}, 2)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	p := vllmProvider("vllm-main", u.baseURL())
	p.Capacity = 1
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{p}, modelOn("qwen-7b", "vllm-main", target)))
	body := `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`
	c := httpClient(t)

	holdCtx, stopHold := context.WithCancel(ctxT(t))
	defer stopHold()
	hold := make(chan error, 1)
	go func() { // Owner: the test; ends when stopHold cancels the request.
		_, err := tryDo(holdCtx, c, http.MethodPost, e.URL+"/v1/chat/completions", body, nil)
		hold <- err
	}()
	waitFor(t, arrived, waitLong, "the first request at the upstream")

	qctx, leave := context.WithCancel(ctxT(t))
	queued := make(chan error, 1)
	go func() { // Owner: the test; ends when leave cancels the request.
		_, err := tryDo(qctx, c, http.MethodPost, e.URL+"/v1/chat/completions", body, nil)
		queued <- err
	}()
	stack.WaitFor(t, waitLong, "the second request queued", func() bool { return e.Dispatcher.Status().Models[0].Pending == 1 })
	leave()
	waitFor(t, queued, waitLong, "the queued client to return")
	stack.WaitFor(t, waitLong, "the queued request counted as cancelled", func() bool { return requestsWithCode(t, e, "cancelled") == 1 })
	if got := requestsWithCode(t, e, "200"); got != 0 {
		t.Errorf("requests counted 200: %v, want 0", got)
	}
	stopHold()
	waitFor(t, hold, waitLong, "the holder to return")
	waitReleased(t, e, "vllm-main")
}

// A request that fails over from a tunnelled provider to one served by a
// run is counted under the route that answered it.
func TestFailoverToRunCountedUnderRun(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"busy","type":"server_error","code":null}}`)
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL()), mockProvider("mock", nil)})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "vllm-main", Target: target}, {Node: nodeID, Provider: "mock", Target: "x"}}}}
	e, _ := startStack(t, cfg)
	r := post(t, e, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d %s, want the run's 200", r.Status, r.Body)
	}
	waitReleased(t, e, "vllm-main")
	waitReleased(t, e, "mock")
	stack.WaitFor(t, waitLong, "the request counted", func() bool { return requestsWithCode(t, e, "200") == 1 })
	for route, want := range map[string]float64{"run": 1, "tunnel": 0} {
		if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "m", "route": route, "code": "200"}); got != want {
			t.Errorf("requests{route=%s,code=200} = %v, want %v", route, got, want)
		}
	}
}
