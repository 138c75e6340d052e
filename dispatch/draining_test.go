package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// drainingReport is what a node that begins to drain sends: every
// provider draining, no figures.
func drainingReport(provs ...string) *iop.LoadReport {
	r := &iop.LoadReport{}
	for _, p := range provs {
		r.Providers = append(r.Providers, &iop.ProviderLoad{ProviderId: p, Health: iop.HealthState_HEALTH_STATE_DRAINING})
	}
	return r
}

// A node's report that its provider drains is taken at once, whether load
// reports are off (interval 0) or the report comes sooner than half the
// interval after the last: from then on nothing is dispatched there, the
// lease still running there is neither fenced nor returned (it returns as
// completed when its request ends, and its slot goes to no waiter), the
// next request goes to the other candidate, a request only the draining
// provider could serve waits for another, and the status shows "draining".
func TestDrainingProviderTakesNoWork(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every float64 // nodes[].load_report_interval_sec
	}{{"reports off", 0}, {"sooner than the interval", 60}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 2}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
				[]tModel{{name: "m", timeout: 60, cands: []string{"a/p", "b/p"}}})
			for i := range cfg.Nodes {
				if tc.every > 0 {
					cfg.Nodes[i].LoadReportIntervalSec = &tc.every
				}
			}
			f := newFixture(t, cfg, nil)
			ca := f.up("a")
			f.up("b")
			running := mustAcquire(t, f.d, Request{Model: "m", Avoid: []ProviderRef{{Node: "b", Provider: "p"}}})
			if running.NodeID != "a" {
				t.Fatalf("first lease on %s, want a", running.NodeID)
			}
			f.d.mu.Lock()
			f.d.nodes["a"].lastLoad = time.Now() // a report was just taken
			f.d.mu.Unlock()

			f.d.Load(ca, drainingReport("p"))
			p := provOf(f.d.Status(), "a", "p")
			if p == nil || p.Health != "draining" || p.Status != "draining" || p.InFlight != 1 {
				t.Fatalf("a/p after its node reported draining: %+v", p)
			}
			if !f.d.Dispatchable() {
				t.Fatal("not dispatchable with b/p free")
			}
			// a/p has a free slot, but drains: the request goes to b.
			next := mustAcquire(t, f.d, Request{Model: "m"})
			if next.NodeID != "b" {
				t.Fatalf("request during the drain went to %s", next.NodeID)
			}
			if _, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true}); !errors.Is(err, ErrNoProvider) {
				t.Fatalf("failover-style acquire with b full and a draining: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiter := f.enqueue(ctx, Request{Model: "m"})
			// The draining run ends: its lease returns as completed, and its
			// slot is handed to nobody.
			running.Release(ReasonCompleted)
			if got := metricValue(t, f.reg, "iop_lease_released_total", released("a", "p", ReasonCompleted)); got != 1 {
				t.Fatalf("completed releases on a/p: %v", got)
			}
			if got := metricValue(t, f.reg, "iop_lease_released_total", released("a", "p", ReasonNodeLost)); got != 0 {
				t.Fatalf("node_lost releases on a/p: %v", got)
			}
			if pendingOf(f.d.Status(), "m") != 1 {
				t.Fatal("the waiter was given the draining provider's freed slot")
			}
			next.Release(ReasonCompleted)
			if l := recvLease(t, waiter); l.NodeID != "b" {
				t.Fatalf("waiter served by %s", l.NodeID)
			} else {
				l.Release(ReasonCompleted)
			}
		})
	}
}

// A draining report repeated changes nothing and does not get past the
// rate limit again; a provider the node no longer lists as draining is
// not let back by a report the rate limit drops.
func TestDrainingReportBypassesRateOnce(t *testing.T) {
	every := 60.0
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}})
	cfg.Nodes[0].LoadReportIntervalSec = &every
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK}}})
	f.d.Load(ca, drainingReport("p"))
	f.d.Load(ca, &iop.LoadReport{Providers: []*iop.ProviderLoad{{ProviderId: "p", Health: iop.HealthState_HEALTH_STATE_OK}}})
	if p := provOf(f.d.Status(), "a", "p"); p.Health != "draining" {
		t.Fatalf("a/p after an OK report inside the interval: %+v", p)
	}
	if _, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true}); !errors.Is(err, ErrNoProvider) {
		t.Fatalf("acquire on a draining provider: %v", err)
	}
}
