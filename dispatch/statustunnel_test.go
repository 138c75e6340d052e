package dispatch

import (
	"context"
	"testing"
)

// A request that needs the tunnel waits only for the providers that can
// serve it: the status counts it as queued and waiting on those, not on a
// run-only candidate of its model (whose operator would see a queue that
// its capacity cannot drain).
func TestStatusCountsTunnelWaiterOnCapableProvidersOnly(t *testing.T) {
	f := capableFixture(t)
	ctx := context.Background()
	tun := mustAcquire(t, f.d, Request{Model: "m", NeedsTunnel: true})
	defer tun.Release(ReasonCompleted)
	run := mustAcquire(t, f.d, Request{Model: "m"})
	defer run.Release(ReasonCompleted)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.enqueue(cctx, Request{Model: "m", NeedsTunnel: true})
	waitFor(t, "the tunnel request queued", func() bool { return pendingOf(f.d.Status(), "m") == 1 })
	st := f.d.Status()
	if p := provOf(st, "a", "tun"); p.Queued != 1 || p.Waiting != 1 {
		t.Fatalf("tun: queued %d waiting %d, want 1 and 1", p.Queued, p.Waiting)
	}
	if p := provOf(st, "a", "run"); p.Queued != 0 || p.Waiting != 0 {
		t.Fatalf("run (run-only): queued %d waiting %d, want 0 and 0", p.Queued, p.Waiting)
	}
}
