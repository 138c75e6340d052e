package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An edge whose only provider drains has nothing dispatchable (/readyz
// 503), as when the provider is offline: the drain is not a way to take
// work.
func TestOnlyProviderDrainingNotDispatchable(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}})
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	if !f.d.Dispatchable() {
		t.Fatal("not dispatchable before the drain")
	}
	f.d.Load(ca, drainingReport("p"))
	if f.d.Dispatchable() {
		t.Fatal("dispatchable with its only provider draining")
	}
}

// A request for a model whose only candidate has drained for longer than
// offline_grace_sec is answered at once (no provider), as for one offline
// that long, not queued until its timeout; a draining report repeated
// does not restart the grace.
func TestLongDrainingCandidateNotWaitedFor(t *testing.T) {
	every := 60.0
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", timeout: 60, cands: []string{"a/p"}}})
	cfg.Nodes[0].LoadReportIntervalSec = &every
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	f.d.Load(ca, drainingReport("p"))
	grace := cfg.Models[0].OfflineGrace()
	if grace <= 0 {
		t.Fatalf("offline grace %v", grace)
	}
	f.d.mu.Lock()
	r := f.d.nodes["a"].resources["p"]
	r.downSince = r.downSince.Add(-2 * grace)                                     // drained for twice the grace
	f.d.nodes["a"].lastLoad = time.Now().Add(-time.Duration(every) * time.Second) // the next report is taken
	f.d.mu.Unlock()
	f.d.Load(ca, drainingReport("p"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.d.Acquire(ctx, Request{Model: "m"}); !errors.Is(err, ErrNoProvider) {
		t.Fatalf("request for a model whose only candidate drained long ago: %v", err)
	}
}

// A provider reported down and later healthy again hands its free slot to
// the request waiting for it at once. (A draining one never comes back
// within its session: TestDrainOutlivesReportsAnsweredBefore.)
func TestDownProviderBackServesWaiter(t *testing.T) {
	every := 60.0
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", timeout: 60, cands: []string{"a/p"}}})
	cfg.Nodes[0].LoadReportIntervalSec = &every
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OFFLINE}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiter := f.enqueue(ctx, Request{Model: "m"})
	f.d.mu.Lock()
	f.d.nodes["a"].lastLoad = time.Now().Add(-time.Duration(every) * time.Second)
	f.d.mu.Unlock()
	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK}}})
	if l := recvLease(t, waiter); l.NodeID != "a" {
		t.Fatalf("waiter served by %s", l.NodeID)
	} else {
		l.Release(ReasonCompleted)
	}
}
