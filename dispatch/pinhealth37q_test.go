package dispatch

import (
	"context"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// One health report in which px's backend comes back and py's goes down:
// the follow-up pinned to py waits for any candidate from then on, and
// being older than the ordinary waiter it is served first by px's slot.
// Before, px was pumped while the report was still being read, with the
// follow-up still pinned to py: the younger ordinary waiter took px, and
// the follow-up, unpinned at the report's end, found nothing free. Both
// orders of the report's entries are tried.
func TestPinnedUnpinnedBeforeRecoveredPump37q(t *testing.T) {
	ok, off := iop.HealthState_HEALTH_STATE_OK, iop.HealthState_HEALTH_STATE_OFFLINE
	for _, yFirst := range []bool{false, true} {
		cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "px", cap: 1}, {name: "py", cap: 1}}}},
			[]tModel{{name: "m", timeout: 60, cands: []string{"n/px", "n/py"}}})
		f := newFixture(t, cfg, nil)
		c := f.up("n")
		f.d.setHealth("n", c, []*iop.ProviderSnapshot{{ProviderId: "px", Health: off}, {ProviderId: "py", Health: ok}})
		ly := mustAcquire(t, f.d, Request{Model: "m"})
		if ly.ProviderID != "py" {
			t.Fatalf("first lease on %s, want py (px is offline)", ly.ProviderID)
		}
		f.d.RememberResponse("resp_y", ly)
		ctx := context.Background()
		fu := f.enqueue(ctx, Request{Model: "m", PreviousResponseID: "resp_y"})
		ord := f.enqueue(ctx, Request{Model: "m"})
		report := []*iop.ProviderSnapshot{{ProviderId: "px", Health: ok}, {ProviderId: "py", Health: off}}
		if yFirst {
			report[0], report[1] = report[1], report[0]
		}
		f.d.setHealth("n", c, report)
		if l := recvLease(t, fu); l.ProviderID != "px" {
			t.Fatalf("py first %v: the follow-up was granted %s, want px", yFirst, l.ProviderID)
		}
		if n := pendingOf(f.d.Status(), "m"); n != 1 {
			t.Fatalf("py first %v: pending %d, want the ordinary waiter still queued", yFirst, n)
		}
		f.d.Close()
		if r := recv(t, ord); r.err == nil {
			t.Fatalf("py first %v: the ordinary waiter was granted %s, want it queued until Close", yFirst, r.l.ProviderID)
		}
	}
}
