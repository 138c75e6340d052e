package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A stream that fails after its first byte is counted once, under the
// status its error maps to (502), not as the 200 its headers said.
func TestStreamFailureCountedUnderItsError(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", map[string]any{"fail_trigger": "fail now"})}, modelOn("demo", "mock", "m"))
	e, _ := startStack(t, cfg)
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", chatBody("demo", "fail now", true), nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"error"`) {
		t.Fatalf("want a started stream ending with an error event: %d %s", r.Status, r.Body)
	}
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "502"}); got != 1 {
		t.Fatalf("iop_requests_total{code=502} = %v, want 1", got)
	}
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "200"}); got != 0 {
		t.Fatalf("iop_requests_total{code=200} = %v, want 0", got)
	}
}

// A request refused by the queue carries the route it would have taken and
// its duration is observed.
func TestQueueRejectionTimedWithRoute(t *testing.T) {
	m := modelOn("demo", "mock", "m")
	m.MaxQueue = -1 // no waiting room: refused while the only slot is busy
	grace := 0.0
	m.OfflineGraceSec = &grace
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", map[string]any{"delay_ms": 200})}, m)
	cfg.Nodes[0].Providers[0].Capacity = 1
	e, _ := startStack(t, cfg)
	held := postAsync(t, e, "/v1/chat/completions", chatBody("demo", strings.Repeat("w ", 20), false))
	stack.WaitFor(t, waitLong, "the slot to be held", func() bool { return inFlight(e, "mock") == 1 })
	r := post(t, e, "/v1/chat/completions", chatBody("demo", "hi", false))
	assertError(t, r, http.StatusTooManyRequests, "queue_full")
	<-held
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "429"}); got != 1 {
		t.Fatalf("iop_requests_total{route=run,code=429} = %v, want 1", got)
	}
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var samples uint64
	for _, mf := range mfs {
		if mf.GetName() != "iop_request_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if labelOf(s, "route") == "run" {
				samples += s.GetHistogram().GetSampleCount()
			}
		}
	}
	if samples != 2 {
		t.Fatalf("%d duration samples on route run, want 2 (the held request and the refused one)", samples)
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
