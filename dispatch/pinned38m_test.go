package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Mutants of the pinned waiters (pinned.go and the pin hunks of pool.go,
// health.go, registry.go, status.go) that no test can tell from the code,
// so none is written for them:
//   - headBefore walking on past the first waiter not being granted: a
//     list is in order, so no later waiter is served before it.
//   - unpinStaleLocked without its skip of models with nothing pinned, or
//     appending a model to moved once per list unpinned: a cost, not an
//     outcome (an empty range; a second pump of a provider finds it full
//     or nobody left).
//   - pumpLocked without its len(m.pinned) > 0 guard: a look-up in a nil
//     or empty map finds nothing.
//   - pinHoldsLocked without d.models[m.name] == m: its callers pass the
//     current model only (Acquire under the lock, unpinStaleLocked
//     ranging d.models), and a reload fails or moves an old model's
//     waiters.
//   - pinHoldsLocked without d.resources[r.key] == r: a resource leaves
//     d.resources only with live cleared (evConfigured), which the
//     check after it tests.
//   - pinHoldsLocked without !r.dying(): a closed connection's provider
//     is fenced by the registry a moment later, which unpins its waiters
//     (transitionLocked); only the order of that moment differs.
//   - pinHoldsLocked without r.couldTake: a validated provider has a
//     capacity and a long capacity of at least 1, a candidate is
//     referenced, and r.serves, checked beside it, is the stricter of
//     the two tunnel checks.
//   - the status figures counting a pinned waiter in queued whatever its
//     provider's live and referenced: queued is shown for a live provider
//     only, and every step that can take a provider from its waiters
//     unpins them before the lock is released, so a pinned list's
//     provider is a candidate (referenced) whenever a snapshot is taken.

// A waiter made ordinary forgets its pin: once it is granted by another
// provider, leaving its model's queue empty, the list of waiters pinned
// since to its old provider is not taken for its own. Before it forgot
// it, that list was dropped with its waiter in it, which no pump would
// then see: the later follow-up waited out its queue timeout with its
// provider free.
func TestUnpinnedWaiterForgetsItsPin38m(t *testing.T) {
	f, ca, _, la := pinPair(t, 60, 0)
	lb := mustAcquire(t, f.d, Request{Model: "m"})
	if lb.NodeID != "b" {
		t.Fatalf("second lease on %s, want b", lb.NodeID)
	}
	ctx := context.Background()
	first := f.enqueue(ctx, followUp) // pinned to a (full)
	ok, off := iop.HealthState_HEALTH_STATE_OK, iop.HealthState_HEALTH_STATE_OFFLINE
	f.d.setHealth("a", ca, []*iop.ProviderSnapshot{{ProviderId: "p", Health: off}}) // first waits for any
	f.d.setHealth("a", ca, []*iop.ProviderSnapshot{{ProviderId: "p", Health: ok}})  // a back, still full
	second := f.enqueue(ctx, followUp)                                              // pinned to a
	lb.Release(ReasonCompleted)
	if l := recvLease(t, first); l.NodeID != "b" {
		t.Fatalf("the unpinned follow-up was granted %s, want b", l.NodeID)
	}
	la.Release(ReasonCompleted)
	if l := recvLease(t, second); l.NodeID != "a" {
		t.Fatalf("the follow-up pinned to a was granted %s, want a", l.NodeID)
	}
}

// A follow-up naming a response whose provider a reload removed (the id
// is still remembered, its resource gone) is routed as usual: no pin to
// a provider that no longer exists.
func TestFollowUpOfRemovedProviderRoutedAsUsual38m(t *testing.T) {
	f, _, _, _ := pinPair(t, 60, 0)
	f.d.Reload(buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "q", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 60, cands: []string{"b/p", "a/q"}}}))
	if l := mustAcquire(t, f.d, followUp); l.NodeID != "b" {
		t.Fatalf("the follow-up of a removed provider's response was granted %s, want b", l.NodeID)
	}
}

// Each slot a pump hands on in cluster mode goes to another waiter: one
// whose hand-on is in flight (granting) keeps its place but is passed
// over (headBefore), so two slots freed while Redis holds the first take
// start takes for two waiters, not two for the first (whose second slot
// would go back only once both takes ended, and be lost for as long if
// Redis answered Full).
func TestPumpPassesOverWaiterBeingGranted38m(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", 20*time.Second)
	var held []*Lease
	for range 4 { // only-p2's capacity
		held = append(held, mustAcquire(t, e.d, Request{Model: "only-p2"}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w1 := e.enqueue(ctx, Request{Model: "only-p2"})
	w2 := e.enqueue(ctx, Request{Model: "only-p2"})
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	unpaused := false
	defer func() {
		if !unpaused {
			_ = rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err()
		}
	}()
	held[0].Release(ReasonCompleted)
	held[1].Release(ReasonCompleted)
	e.d.mu.Lock()
	granting := 0
	for _, q := range e.d.models["only-p2"].queues {
		for el := q.Front(); el != nil; el = el.Next() {
			if el.Value.(*waiter).granting {
				granting++
			}
		}
	}
	e.d.mu.Unlock()
	if granting != 2 {
		t.Errorf("%d waiters being granted after two slots freed, want both", granting)
	}
	if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	unpaused = true
	recvLease(t, w1)
	recvLease(t, w2)
}
