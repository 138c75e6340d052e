package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodewire"
)

// pinPairCfg is model m on providers a/p and b/p, one slot each, queueing
// up to timeout seconds and maxQueue requests (0: the defaults).
func pinPairCfg(t *testing.T, timeout float64, maxQueue int, cands ...string) *config.Edge {
	t.Helper()
	if len(cands) == 0 {
		cands = []string{"a/p", "b/p"}
	}
	return buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: timeout, maxQueue: maxQueue, cands: cands}})
}

// pinPair is pinPairCfg's dispatcher with both nodes ready, and a lease
// on a/p (routing picks a first: both idle, configured order) whose
// response "resp_a" it remembers.
func pinPair(t *testing.T, timeout float64, maxQueue int) (f *fixture, ca, cb *nodewire.Conn, la *Lease) {
	t.Helper()
	f = newFixture(t, pinPairCfg(t, timeout, maxQueue), nil)
	ca, cb = f.up("a"), f.up("b")
	la = mustAcquire(t, f.d, Request{Model: "m"})
	if la.NodeID != "a" {
		t.Fatalf("first lease on %s, want a", la.NodeID)
	}
	f.d.RememberResponse("resp_a", la)
	return f, ca, cb, la
}

// followUp is a Responses follow-up of resp_a.
var followUp = Request{Model: "m", PreviousResponseID: "resp_a"}

// A follow-up whose provider (a) is full waits for it although b is free,
// and is served by a once a frees. Before, it was granted b at once (which
// answers vLLM's 404). Meanwhile the waiter counts against a's queue only,
// and an ordinary request is served by b.
func TestPinnedWaitsForItsProvider37b(t *testing.T) {
	f, _, _, la := pinPair(t, 60, 0)
	ctx := context.Background()
	fu := f.enqueue(ctx, followUp)
	st := f.d.Status()
	if qa, qb := provOf(st, "a", "p").Queued, provOf(st, "b", "p").Queued; qa != 1 || qb != 0 {
		t.Fatalf("queued: a %d, b %d; want the pinned waiter against a only", qa, qb)
	}
	lo := mustAcquire(t, f.d, Request{Model: "m"})
	if lo.NodeID != "b" {
		t.Fatalf("an ordinary request went to %s, want b", lo.NodeID)
	}
	// A follow-up avoiding a (a failover from it) is ordinary: it does
	// not wait for a. b is full now, so it queues and b's release serves it.
	av := f.enqueue(ctx, Request{Model: "m", PreviousResponseID: "resp_a", Avoid: []ProviderRef{{Node: "a", Provider: "p"}}})
	lo.Release(ReasonCompleted)
	if l := recvLease(t, av); l.NodeID != "b" {
		t.Fatalf("the follow-up avoiding a went to %s, want b", l.NodeID)
	}
	if n := pendingOf(f.d.Status(), "m"); n != 1 {
		t.Fatalf("pending %d after b's release, want the pinned waiter still queued", n)
	}
	la.Release(ReasonCompleted)
	if l := recvLease(t, fu); l.NodeID != "a" {
		t.Fatalf("the follow-up was granted %s, want a", l.NodeID)
	}
}

// No head-of-line blocking: a freed b serves the first waiter it can
// serve, the ordinary one queued behind a follow-up pinned to a; a's
// release then serves the follow-up. Before, the follow-up (the oldest)
// took b's slot.
func TestPinnedDoesNotHoldUpOthers37b(t *testing.T) {
	f, _, _, la := pinPair(t, 60, 0)
	lb := mustAcquire(t, f.d, Request{Model: "m"})
	ctx := context.Background()
	fu := f.enqueue(ctx, followUp)
	ord := f.enqueue(ctx, Request{Model: "m"})
	lb.Release(ReasonCompleted)
	if l := recvLease(t, ord); l.NodeID != "b" {
		t.Fatalf("the ordinary waiter was granted %s, want b", l.NodeID)
	}
	la.Release(ReasonCompleted)
	if l := recvLease(t, fu); l.NodeID != "a" {
		t.Fatalf("the follow-up was granted %s, want a", l.NodeID)
	}
}

// A pinned waiter keeps its place among the waiters its provider serves
// (arrival, then priority), and counts in the model's max_queue.
func TestPinnedQueueOrderAndBound37b(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		f, _, _, la := pinPair(t, 60, 2)
		lb := mustAcquire(t, f.d, Request{Model: "m"})
		ctx := context.Background()
		ord := f.enqueue(ctx, Request{Model: "m"})
		fu := f.enqueue(ctx, followUp)
		// The queue holds two (one pinned): a third is refused.
		_, err := f.d.Acquire(ctx, Request{Model: "m"})
		wantErr(t, err, ErrQueueFull)
		la.Release(ReasonCompleted)
		lo := recvLease(t, ord) // older: a's slot is its
		if lo.NodeID != "a" {
			t.Fatalf("the older ordinary waiter was granted %s, want a", lo.NodeID)
		}
		lb.Release(ReasonCompleted) // b's slot is not the follow-up's
		if n := pendingOf(f.d.Status(), "m"); n != 1 {
			t.Fatalf("pending %d after b's release, want the follow-up waiting for a", n)
		}
		lo.Release(ReasonCompleted)
		if l := recvLease(t, fu); l.NodeID != "a" {
			t.Fatalf("the follow-up was granted %s, want a", l.NodeID)
		}
	})
	t.Run("priority", func(t *testing.T) {
		f, _, _, la := pinPair(t, 60, 0)
		mustAcquire(t, f.d, Request{Model: "m"}) // b full
		ctx := context.Background()
		ord := f.enqueue(ctx, Request{Model: "m"})
		req := followUp
		req.Priority = 1
		fu := f.enqueue(ctx, req)
		la.Release(ReasonCompleted)
		if l := recvLease(t, fu); l.NodeID != "a" {
			t.Fatalf("the higher-priority follow-up was granted %s, want a", l.NodeID)
		}
		if n := pendingOf(f.d.Status(), "m"); n != 1 {
			t.Fatalf("pending %d, want the ordinary waiter still queued", n)
		}
		_ = ord
	})
}

// A pinned waiter's queue timeout is an ordinary waiter's: the same
// error, and both waits are counted.
func TestPinnedQueueTimeout37b(t *testing.T) {
	f, _, _, _ := pinPair(t, 0.2, 0)
	mustAcquire(t, f.d, Request{Model: "m"}) // b full
	ctx := context.Background()
	fu := f.enqueue(ctx, followUp)
	ord := f.enqueue(ctx, Request{Model: "m"})
	rf, ro := recv(t, fu), recv(t, ord)
	wantErr(t, rf.err, ErrQueueTimeout)
	wantErr(t, ro.err, ErrQueueTimeout)
	if rf.err.Error() != ro.err.Error() {
		t.Fatalf("pinned waiter: %v; ordinary: %v", rf.err, ro.err)
	}
	if h := seriesOf(t, f, "iop_queue_wait_seconds", "model", "m").GetHistogram(); h.GetSampleCount() != 4 {
		t.Fatalf("%d queue waits counted, want 4 (two grants, two timeouts)", h.GetSampleCount())
	}
	if n := pendingOf(f.d.Status(), "m"); n != 0 {
		t.Fatalf("pending %d after the timeouts", n)
	}
}

// The pinned provider stops being a candidate while the follow-up waits:
// it waits for any candidate from then on, and a free one serves it at
// once; with none free, the next release of another does, or it times out
// as ordinary waiters do. It never waits for a provider that is gone.
func TestPinnedProviderGoneUnpins37b(t *testing.T) {
	ctx := context.Background()
	gone := map[string]func(f *fixture, ca *nodewire.Conn){
		"node lost": func(f *fixture, ca *nodewire.Conn) { f.d.Closed(ca, errors.New("lost")) },
		"draining":  func(f *fixture, ca *nodewire.Conn) { f.d.Load(ca, drainingReport("p")) },
		"not a candidate any more": func(f *fixture, _ *nodewire.Conn) {
			f.d.Reload(pinPairCfg(t, 60, 0, "b/p"))
		},
		"not a candidate of m, still of another model": func(f *fixture, _ *nodewire.Conn) {
			cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
				[]tModel{{name: "m", timeout: 60, cands: []string{"b/p"}}, {name: "other", cands: []string{"a/p"}}})
			f.d.Reload(cfg)
		},
		"provider removed": func(f *fixture, _ *nodewire.Conn) {
			cfg := pinPairCfg(t, 60, 0, "b/p")
			cfg.Nodes[0].Providers[0].Name = "q"
			f.d.Reload(cfg)
		},
	}
	for name, take := range gone {
		t.Run(name+", b free", func(t *testing.T) {
			f, ca, _, _ := pinPair(t, 60, 0)
			fu := f.enqueue(ctx, followUp)
			take(f, ca)
			if l := recvLease(t, fu); l.NodeID != "b" {
				t.Fatalf("granted %s, want b", l.NodeID)
			}
		})
	}
	t.Run("node lost, b full", func(t *testing.T) {
		f, ca, _, _ := pinPair(t, 60, 0)
		lb := mustAcquire(t, f.d, Request{Model: "m"})
		fu := f.enqueue(ctx, followUp)
		f.d.Closed(ca, errors.New("lost"))
		if n := pendingOf(f.d.Status(), "m"); n != 1 {
			t.Fatalf("pending %d, want the follow-up waiting", n)
		}
		lb.Release(ReasonCompleted)
		if l := recvLease(t, fu); l.NodeID != "b" {
			t.Fatalf("granted %s, want b", l.NodeID)
		}
	})
	t.Run("node lost, b full, timeout", func(t *testing.T) {
		f, ca, _, _ := pinPair(t, 0.3, 0)
		mustAcquire(t, f.d, Request{Model: "m"})
		fu := f.enqueue(ctx, followUp)
		f.d.Closed(ca, errors.New("lost"))
		wantErr(t, recv(t, fu).err, ErrQueueTimeout)
	})
	t.Run("node back before a slot frees", func(t *testing.T) {
		// Unpinned by the loss, the waiter is served by whichever
		// candidate frees first: a's new session here.
		f, ca, _, _ := pinPair(t, 60, 0)
		mustAcquire(t, f.d, Request{Model: "m"})
		fu := f.enqueue(ctx, followUp)
		f.d.Closed(ca, errors.New("lost"))
		f.up("a")
		if l := recvLease(t, fu); l.NodeID != "a" {
			t.Fatalf("granted %s, want a (the only one with room)", l.NodeID)
		}
	})
}

// A follow-up that must not wait (NoWait: a failover) is not pinned: with
// its provider full it goes to another candidate, as before.
func TestPinnedNotForNoWait37b(t *testing.T) {
	f, _, _, _ := pinPair(t, 60, 0)
	req := followUp
	req.NoWait = true
	if l := mustAcquire(t, f.d, req); l.NodeID != "b" {
		t.Fatalf("granted %s, want b", l.NodeID)
	}
}
