package dispatch

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A waiter whose hand-on on one provider ends without a lease (the
// cluster is full there) is offered its model's other providers: one that
// was freed while the hand-on was in flight passed the waiter over (it
// was being granted) and, with nothing else to wake it, would have left
// the waiter queued beside a free slot until its timeout.
func TestClusterWaiterOfferedOtherProviderAfterFullHandOn(t *testing.T) {
	onlyAnnouncementsWake(t)
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n1", provs: []tProv{{name: "p", cap: 1}}}, {id: "n2", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 30, cands: []string{"n1/p", "n2/p"}}})
	f := patientClusterFixture(t, cfg, rs)
	f.up("n1")
	f.up("n2")
	r1, r2 := f.res("n1", "p"), f.res("n2", "p")
	// Other edges hold both slots: the request queues, both providers
	// marked full.
	rdb := otherEdgeHolds(t, rs, cluster.Key("n1", "p"), "other/1")
	otherEdgeHolds(t, rs, cluster.Key("n2", "p"), "other/2")
	ch := f.enqueue(context.Background(), Request{Model: "m"})

	// n2's slot comes back; its announcement is delivered (below) while
	// the waiter's hand-on on n1 is in flight.
	if err := rdb.ZRem(context.Background(), cluster.Key("n2", "p"), "other/2").Err(); err != nil {
		t.Fatal(err)
	}
	pause := pauseWrites(t, rs)
	f.d.wake(func(r *resource) bool { return r == r1 }) // a hand-on on n1, held by the pause
	waitFor(t, "the hand-on on n1 in flight", func() bool {
		f.d.mu.Lock()
		defer f.d.mu.Unlock()
		return r1.inFlight == 1
	})
	f.d.wake(func(r *resource) bool { return r == r2 }) // passes the waiter over
	unpause(t, pause)                                   // n1 answers Full
	l := recvLease(t, ch)
	if l.NodeID != "n2" {
		t.Fatalf("granted on %s, want n2", l.NodeID)
	}
	l.Release(ReasonCompleted)
}
