package dispatch

import (
	"context"
	"errors"
	"testing"
)

// capableFixture: model "m" lists a/run (mock, run-only, capacity 1) first
// and a/tun (vllm: tunnelled, capacity 1); model "r" lists only a/run.
func capableFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "run", cap: 1}, {name: "tun", cap: 1}}}},
		[]tModel{{name: "m", timeout: 10, cands: []string{"a/run", "a/tun"}}, {name: "r", cands: []string{"a/run"}}})
	cfg.Nodes[0].Providers[1].Type, cfg.Nodes[0].Providers[1].BaseURL = "vllm", "http://127.0.0.1:1/v1"
	f := newFixture(t, cfg, nil)
	f.up("a")
	return f
}

// A request that needs the tunnel is never given a run-only candidate,
// neither at once nor from the queue; a run-only slot freed while it waits
// goes to a younger request that can use it.
func TestNeedsTunnelOnlyGetsCapableCandidates(t *testing.T) {
	f := capableFixture(t)
	ctx := context.Background()
	l := mustAcquire(t, f.d, Request{Model: "m", NeedsTunnel: true})
	if l.ProviderID != "tun" {
		t.Fatalf("leased %s, want tun", l.ProviderID)
	}
	// tun is full; run is idle: a second tunnel request must wait for tun.
	w := f.enqueue(ctx, Request{Model: "m", NeedsTunnel: true})
	busy := mustAcquire(t, f.d, Request{Model: "m"}) // takes run
	if busy.ProviderID != "run" {
		t.Fatalf("plain request leased %s", busy.ProviderID)
	}
	plain := f.enqueue(ctx, Request{Model: "m"})
	busy.Release(ReasonCompleted) // run frees: the younger plain waiter gets it
	if got := recvLease(t, plain); got.ProviderID != "run" {
		t.Fatalf("plain waiter got %s", got.ProviderID)
	} else {
		got.Release(ReasonCompleted)
	}
	select {
	case r := <-w:
		t.Fatalf("the tunnel waiter was served by %v (err %v) while tun is busy", r.l, r.err)
	default:
	}
	l.Release(ReasonCompleted) // tun frees: the tunnel waiter gets it
	if got := recvLease(t, w); got.ProviderID != "tun" {
		t.Fatalf("tunnel waiter got %s", got.ProviderID)
	} else {
		got.Release(ReasonCompleted)
	}
	// A model with no capable candidate refuses at once.
	if _, err := f.d.Acquire(ctx, Request{Model: "r", NeedsTunnel: true}); !errors.Is(err, ErrNoCapableProvider) {
		t.Fatalf("run-only model: %v, want ErrNoCapableProvider", err)
	}
}
