package llamacpp

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// routes answers each path with a fixed status and body (404 otherwise).
type route struct {
	status int
	body   string
	header map[string]string
}

func routesServer(t *testing.T, routes map[string]route) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := routes[r.URL.Path]
		if !ok {
			rt = route{status: http.StatusNotFound, body: `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`}
		}
		for k, v := range rt.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rt.status)
		_, _ = io.WriteString(w, rt.body)
	}))
	t.Cleanup(s.Close)
	return s
}

// A /health answer other than 200 or 503 (base_url pointing at something
// that is not llama-server, or a server error) is offline, with the status.
func TestHealthOtherStatusIsOffline(t *testing.T) {
	s := routesServer(t, map[string]route{"/health": {status: http.StatusInternalServerError, body: "boom"}, "/slots": {status: 200, body: slotsJSON(false)}})
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOffline || !strings.Contains(h.Detail, "500") {
		t.Fatalf("health %+v, want offline naming HTTP 500", h)
	}
}

// A redirected /health is not followed (the probe carries the key): it is
// an answer other than 200.
func TestHealthRedirectNotFollowed(t *testing.T) {
	s := routesServer(t, map[string]route{
		"/health":    {status: http.StatusFound, header: map[string]string{"Location": "/elsewhere"}},
		"/elsewhere": {status: http.StatusOK, body: healthOK},
	})
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOffline || !strings.Contains(h.Detail, "302") {
		t.Fatalf("health %+v, want offline naming HTTP 302", h)
	}
}

// With both /slots and /metrics on, the slots give the load; /metrics is
// not asked.
func TestSlotsWinOverMetrics(t *testing.T) {
	s := routesServer(t, map[string]route{"/health": {status: 200, body: healthOK}, "/slots": {status: 200, body: slotsJSON(true, false)}, "/metrics": {status: 200, body: metricsText}})
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOK || h.Running != 1 || h.Waiting != 0 || h.Detail != "1 of 2 slots processing" {
		t.Fatalf("health %+v, want ok from the slots: 1 of 2 processing", h)
	}
}

// /metrics with nothing deferred is ok, not degraded.
func TestMetricsNothingDeferredIsOK(t *testing.T) {
	metrics := strings.Replace(metricsText, "llamacpp:requests_deferred 3", "llamacpp:requests_deferred 0", 1)
	s := routesServer(t, map[string]route{"/health": {status: 200, body: healthOK}, "/slots": {status: 501, body: slotsNoSupport}, "/metrics": {status: 200, body: metrics}})
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOK || h.Running != 2 || h.Waiting != 0 {
		t.Fatalf("health %+v, want ok with 2 processing, 0 deferred", h)
	}
}

// A /slots answer longer than maxProbeBody is not read whole: it counts as
// no slots answer.
func TestSlotsAnswerBounded(t *testing.T) {
	one := `{"id":0,"n_ctx":4096,"is_processing":true,"pad":"` + strings.Repeat("x", 1000) + `"}`
	n := maxProbeBody/len(one) + 2
	big := "[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]"
	s := routesServer(t, map[string]route{"/health": {status: 200, body: healthOK}, "/slots": {status: 200, body: big}})
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOK || h.Running != 0 {
		t.Fatalf("health %+v from a %d-byte /slots, want ok with no slot figures", h, len(big))
	}
}

// Reconfigure forgets what was learnt under the old settings: the next
// Health probes the new server at once, within the old result's TTL.
func TestReconfigureDropsCachedHealth(t *testing.T) {
	up := routesServer(t, map[string]route{"/health": {status: 200, body: healthOK}, "/slots": {status: 200, body: slotsJSON(false)}})
	loading := routesServer(t, map[string]route{"/health": {status: 503, body: healthLoading}})
	in := instanceAt(t, up.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("before: %+v", h)
	}
	if err := in.Reconfigure(&iop.AdapterConfig{Name: "llama", Type: TypeName, Capacity: 2, BaseUrl: loading.URL + "/v1"}); err != nil {
		t.Fatal(err)
	}
	if h := in.Health(context.Background()); h.Status != adapter.HealthOffline {
		t.Fatalf("after reconfigure: %+v, want the new server's loading (offline)", h)
	}
}

// waitProbing waits for s to have seen a /health probe.
func waitProbing(t *testing.T, s *slowServer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.health.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no /health probe")
		}
		time.Sleep(time.Millisecond)
	}
}

// A probe in flight when Reconfigure comes is cancelled, and its result
// (the old server's, or its cancellation's "offline") is not kept: the
// next Health asks the new server.
func TestReconfigureDuringProbe(t *testing.T) {
	old := newSlowServer(t)
	busy := routesServer(t, map[string]route{"/health": {status: 200, body: healthOK}, "/slots": {status: 200, body: slotsJSON(true, true)}})
	in := instanceAt(t, old.URL, nil, adapter.Env{})
	first := make(chan adapter.Health, 1)
	// Owner: the test; returns when the old probe ends.
	go func() { first <- in.Health(context.Background()) }()
	waitProbing(t, old)
	if err := in.Reconfigure(&iop.AdapterConfig{Name: "llama", Type: TypeName, Capacity: 2, BaseUrl: busy.URL + "/v1"}); err != nil {
		t.Fatal(err)
	}
	// Under probeTimeout: the old probe ends by its cancellation, not by
	// its own deadline (the old server never answers in this test).
	select {
	case <-first:
	case <-time.After(probeTimeout - time.Second):
		t.Fatal("the probe of the old server went on after Reconfigure")
	}
	if h := in.Health(context.Background()); h.Status != adapter.HealthDegraded || h.Running != 2 {
		t.Fatalf("after reconfigure: %+v, want the new server's two busy slots", h)
	}
}

// Close ends a probe in flight rather than waiting for it.
func TestCloseEndsProbeInFlight(t *testing.T) {
	s := newSlowServer(t)
	in := instanceAt(t, s.URL, nil, adapter.Env{})
	done := make(chan struct{})
	// Owner: the test; returns when the probe ends.
	go func() { defer close(done); in.Health(context.Background()) }()
	waitProbing(t, s)
	closed := make(chan struct{})
	// Owner: the test; Close returns once the probe has ended.
	go func() { defer close(closed); _ = in.Close() }()
	select {
	case <-closed:
	case <-time.After(probeTimeout - time.Second):
		t.Fatal("Close waited for the probe's own deadline")
	}
	<-done
}

// A Reconfigure to another server closes the idle probe connections to
// the old one instead of keeping them for IdleConnTimeout.
func TestReconfigureClosesOldServerConnections(t *testing.T) {
	closed := make(chan struct{}, 16)
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			_, _ = io.WriteString(w, healthOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	old.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	old.Start()
	t.Cleanup(old.Close)
	other := routesServer(t, map[string]route{"/health": {status: 200, body: healthOK}})
	in := instanceAt(t, old.URL, nil, adapter.Env{})
	if h := in.Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("before: %+v", h)
	}
	if err := in.Reconfigure(&iop.AdapterConfig{Name: "llama", Type: TypeName, Capacity: 2, BaseUrl: other.URL + "/v1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe connection to the old server stayed open after Reconfigure")
	}
}

// A probe that Reconfigure superseded, ending after the new settings' probe
// began, leaves that probe registered: callers meanwhile share it instead
// of starting another.
func TestSupersededProbeLeavesNewProbeShared(t *testing.T) {
	old, next := newSlowServer(t), newSlowServer(t)
	in := instanceAt(t, old.URL, nil, adapter.Env{})
	first := make(chan adapter.Health, 1)
	// Owner: the test; returns when the old probe ends (after newBegan).
	go func() { first <- in.Health(context.Background()) }()
	waitProbing(t, old)
	newBegan := make(chan struct{})
	var once sync.Once
	probeDoneHook = func() { once.Do(func() { <-newBegan }) }
	t.Cleanup(func() { probeDoneHook = nil })
	if err := in.Reconfigure(&iop.AdapterConfig{Name: "llama", Type: TypeName, Capacity: 2, BaseUrl: next.URL + "/v1"}); err != nil {
		t.Fatal(err)
	}
	second := make(chan adapter.Health, 1)
	// Owner: the test; returns when the new server answers (release below).
	go func() { second <- in.Health(context.Background()) }()
	waitProbing(t, next)
	close(newBegan)
	<-first
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	in.Health(ctx) // shares the new probe, which is still waiting
	cancel()
	close(next.release)
	if h := <-second; h.Status != adapter.HealthOK {
		t.Fatalf("new server: %+v", h)
	}
	_ = in.Close() // waits for every probe
	if n := next.health.Load(); n != 1 {
		t.Fatalf("the new server got %d /health probes, want 1", n)
	}
}
