package ollama

import (
	"context"
	"net/http"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A load sample is bounded by its interval (load.go: a backend that does
// not answer its probe in time is reported as it last was, never waited
// for). With Ollama hung and another caller's probe under way, a caller
// whose deadline ends gets the last value at once instead of waiting out
// that probe (up to healthProbeTimeout).
func TestHealthHonoursCallerDeadlineBehindAProbe(t *testing.T) {
	f := newFake(t)
	hang := make(chan struct{})
	f.handle("/api/version", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	first := make(chan struct{})
	go func() { // Owner: this test; ends when hang is closed below.
		defer close(first)
		inst.Health(context.Background())
	}()
	defer func() { close(hang); <-first }()
	f.request(t) // the first probe is under way
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = inst.Health(ctx)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Health with a 200 ms deadline returned after %v", d)
	}
}
