package dispatch

import (
	"context"
	"testing"
	"time"
)

// A follow-up is pinned or not by one reading of its remembered response:
// should the id expire between the pick that refused the other candidates
// for its full provider and the queueing, the waiter must not queue
// ordinary beside the free b (nothing pumps an idle b: it would wait out
// its queue timeout). Before, the queueing read the id again and, finding
// it expired, queued the follow-up ordinary while b stood free.
func TestPinnedExpiryBetweenPickAndQueue37q(t *testing.T) {
	f, _, _, la := pinPair(t, 60, 0)
	f.d.mu.Lock()
	base, reads := time.Now(), 0
	// The id is fresh for the pick's two reads (its provider's room, then
	// whether to wait for it), expired from the third on.
	f.d.responses.now = func() time.Time {
		reads++
		if reads <= 2 {
			return base
		}
		return base.Add(RememberedResponseTTL)
	}
	f.d.mu.Unlock()
	fu := f.acquireAsync(context.Background(), followUp)
	var got *acqResult
	waitFor(t, "the follow-up queued or served", func() bool {
		select {
		case r := <-fu:
			got = &r
			return true
		default:
			return pendingOf(f.d.Status(), "m") == 1
		}
	})
	if got != nil {
		// Routed as if it named no response: b, the one with room.
		if got.err != nil || got.l.NodeID != "b" {
			t.Fatalf("follow-up: lease %+v, err %v; want b", got.l, got.err)
		}
		return
	}
	f.d.mu.Lock()
	pinned := len(f.d.models["m"].pinned)
	f.d.mu.Unlock()
	if pinned != 1 {
		t.Fatalf("the follow-up queued ordinary while b is free (%d pinned lists)", pinned)
	}
	la.Release(ReasonCompleted)
	if l := recvLease(t, fu); l.NodeID != "a" {
		t.Fatalf("the pinned follow-up was granted %s, want a", l.NodeID)
	}
}
