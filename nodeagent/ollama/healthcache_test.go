package ollama

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A model listed by "model" alone (servers and proxies that leave "name"
// empty) is still listed.
func TestModelsFallBackToModelField(t *testing.T) {
	f := newFake(t)
	f.handle("/api/tags", jsonStatus(200, `{"models":[{"name":"","model":"qwen3:8b"},{"name":"llama3.2:latest"},{}]}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	got, err := inst.Models(context.Background())
	if err != nil || !slices.Equal(got, []string{"qwen3:8b", "llama3.2:latest"}) {
		t.Fatalf("Models = %q, %v", got, err)
	}
}

// A probe its caller cancelled says nothing about Ollama: the next caller
// probes again rather than being served that probe's "offline".
func TestCancelledProbeNotCached(t *testing.T) {
	f := newFake(t)
	var hits atomic.Int32
	release := make(chan struct{})
	f.handle("/api/version", func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			select { // the first probe hangs until its caller gives up
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write([]byte(`{"version":"0.9.0"}`))
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan adapter.Health, 1)
	go func() { done <- inst.Health(ctx) }() // Owner: this test; ends when ctx is cancelled below.
	f.request(t)                             // the probe is under way
	cancel()
	<-done
	if h := inst.Health(context.Background()); h.Status != adapter.HealthOK || h.Detail != "ollama 0.9.0" {
		t.Fatalf("Health after a cancelled probe = %+v, want a fresh ok", h)
	}
}

// A probe of the old base URL that ends after a Reconfigure is not cached
// as the new server's health.
func TestProbeOfReplacedServerNotCached(t *testing.T) {
	old := newFake(t)
	release := make(chan struct{})
	old.handle("/api/version", func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = w.Write([]byte(`{"version":"0.1.0"}`))
	})
	repl := newFake(t)
	repl.handle("/api/version", jsonStatus(500, `{"error":"broken"}`))
	repl.handle("/", jsonStatus(500, `{"error":"broken"}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: old.URL})
	done := make(chan adapter.Health, 1)
	go func() { done <- inst.Health(context.Background()) }() // Owner: this test; ends when release is closed.
	old.request(t)
	if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: repl.URL}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if h := <-done; h.Status != adapter.HealthOK {
		t.Fatalf("old probe = %+v", h)
	}
	if h := inst.Health(context.Background()); h.Status != adapter.HealthOffline {
		t.Fatalf("Health after Reconfigure = %+v, want the new server's offline", h)
	}
}

// A cached probe result expires after healthTTL: a server that went down
// is reported offline by a later call.
func TestHealthCacheExpires(t *testing.T) {
	f := newFake(t)
	var down atomic.Bool
	f.handle("/api/version", func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"version":"0.9.0"}`))
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if h := inst.Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("first Health = %+v", h)
	}
	down.Store(true)
	// The expiry itself is under test, so this waits on time: up to ten
	// TTLs for a fresh probe.
	deadline := time.Now().Add(10 * healthTTL)
	for inst.Health(context.Background()).Status != adapter.HealthOffline {
		if time.Now().After(deadline) {
			t.Fatalf("Health still cached after %v", 10*healthTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A model listing cut short by its caller's deadline is that deadline, not
// "ollama is unreachable": the node's capabilities answer says "timed out"
// for a slow server and names reachability only for a failed connection.
func TestModelsDeadlineIsNotUnreachable(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	defer close(release)
	f.handle("/api/tags", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // Owner: this test; ends once the listing reached the server (or after 5 s).
		defer cancel()
		select {
		case <-f.reqs:
		case <-time.After(5 * time.Second):
		}
	}()
	_, err := inst.Models(ctx)
	var ae *adapter.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want the caller's cancellation, not an adapter error", err, err)
	}
}
