package dispatch

import (
	"context"
	"errors"
	"testing"
)

// Two models over the same providers, each with a follow-up pinned to a
// (full), b free. When a's node is lost both follow-ups wait for any
// candidate, and b's slot goes to the older one, whichever model it
// queued in. Before, the models were unpinned one at a time, each pumped
// at once: when m1 came first (map order: half the time), b went to its
// younger follow-up while m2's older one was still pinned to the lost a.
func TestPinnedUnpinnedAcrossModelsBeforePump37q(t *testing.T) {
	for i := range 16 {
		cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
			[]tModel{{name: "m1", timeout: 60, cands: []string{"a/p", "b/p"}}, {name: "m2", timeout: 60, cands: []string{"a/p", "b/p"}}})
		f := newFixture(t, cfg, nil)
		ca, _ := f.up("a"), f.up("b")
		la := mustAcquire(t, f.d, Request{Model: "m2"})
		if la.NodeID != "a" {
			t.Fatalf("run %d: first lease on %s, want a", i, la.NodeID)
		}
		f.d.RememberResponse("resp_a", la)
		// b busy while the follow-ups queue, so that both pin to a.
		lb := mustAcquire(t, f.d, Request{Model: "m1"})
		ctx := context.Background()
		older := f.enqueue(ctx, Request{Model: "m2", PreviousResponseID: "resp_a"})
		younger := f.enqueue(ctx, Request{Model: "m1", PreviousResponseID: "resp_a"})
		lb.Release(ReasonCompleted)
		if n := pendingOf(f.d.Status(), "m1") + pendingOf(f.d.Status(), "m2"); n != 2 {
			t.Fatalf("run %d: %d waiting after b's release, want both pinned to a", i, n)
		}
		f.d.Closed(ca, errors.New("lost"))
		if l := recvLease(t, older); l.NodeID != "b" {
			t.Fatalf("run %d: the older follow-up was granted %s, want b", i, l.NodeID)
		}
		f.d.Close()
		if r := recv(t, younger); !errors.Is(r.err, ErrDispatcherShutdown) {
			t.Fatalf("run %d: the younger follow-up: lease %v, err %v; want it waiting until Close", i, r.l != nil, r.err)
		}
	}
}
