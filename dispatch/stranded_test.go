package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A reload that leaves a model no candidate able to serve a queued
// request's kind (a request that needs the tunnel, the model moved to
// run-only providers) refuses that request at once, as it refuses a new
// one, instead of leaving it queued for its whole queue_timeout_sec (10 s
// here) to end in queue_timeout. Waiters the model can still serve keep
// their place.
func TestReloadFailsWaitersItCannotServe(t *testing.T) {
	f := capableFixture(t)
	ctx := context.Background()
	tun := mustAcquire(t, f.d, Request{Model: "m", NeedsTunnel: true})
	run := mustAcquire(t, f.d, Request{Model: "m"})
	tw := f.enqueue(ctx, Request{Model: "m", NeedsTunnel: true})
	pw := f.enqueue(ctx, Request{Model: "m"})

	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "run", cap: 1}, {name: "tun", cap: 1}}}},
		[]tModel{{name: "m", timeout: 10, cands: []string{"a/run"}}, {name: "r", cands: []string{"a/run"}}})
	cfg.Nodes[0].Providers[1].Type, cfg.Nodes[0].Providers[1].BaseURL = "vllm", "http://127.0.0.1:1/v1"
	f.d.Reload(cfg)

	select {
	case r := <-tw:
		if !errors.Is(r.err, ErrNoCapableProvider) {
			t.Fatalf("tunnel waiter: %v, %v; want ErrNoCapableProvider", r.l, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the tunnel waiter stayed queued after the reload left no candidate able to serve it")
	}
	if got := pendingOf(f.d.Status(), "m"); got != 1 {
		t.Fatalf("pending %d, want the plain waiter still queued", got)
	}
	run.Release(ReasonCompleted)
	if l := recvLease(t, pw); l.ProviderID != "run" {
		t.Fatalf("plain waiter got %s", l.ProviderID)
	} else {
		l.Release(ReasonCompleted)
	}
	tun.Release(ReasonCompleted)
}
