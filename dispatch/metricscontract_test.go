package dispatch

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The dispatcher's series carry the names and label values CONTRACT §6
// gives them, exist at zero from the start, and count each event once:
// two leases (one granted at once, one after queueing) are two
// acquisitions, two completed releases and two queue waits, observed in
// seconds.
func TestMetricsAsTheContractNamesThem(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", timeout: 30, cands: []string{"a/p"}}})
	f := newFixture(t, cfg, nil)
	for _, o := range []string{"ready", "rejected", "superseded", "lost"} {
		if v := counterValue(t, f, "iop_node_sessions_total", "node", "a", "outcome", o); v != 0 {
			t.Fatalf("iop_node_sessions_total{outcome=%q} = %v at start", o, v)
		}
	}
	if v := counterValue(t, f, "iop_lease_acquired_total", "node", "a", "provider", "p"); v != 0 {
		t.Fatalf("iop_lease_acquired_total = %v at start", v)
	}
	for _, r := range []string{"completed", "cancelled", "error", "node_lost"} {
		if v := counterValue(t, f, "iop_lease_released_total", "node", "a", "provider", "p", "reason", r); v != 0 {
			t.Fatalf("iop_lease_released_total{reason=%q} = %v at start", r, v)
		}
	}
	f.up("a")
	start := time.Now()
	first := mustAcquire(t, f.d, Request{Model: "m"})
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	first.Release(ReasonCompleted)
	recvLease(t, ch).Release(ReasonCompleted)
	elapsed := time.Since(start).Seconds()
	if v := counterValue(t, f, "iop_lease_acquired_total", "node", "a", "provider", "p"); v != 2 {
		t.Fatalf("iop_lease_acquired_total = %v, want 2", v)
	}
	if v := counterValue(t, f, "iop_lease_released_total", "node", "a", "provider", "p", "reason", "completed"); v != 2 {
		t.Fatalf("iop_lease_released_total{reason=completed} = %v, want 2", v)
	}
	h := seriesOf(t, f, "iop_queue_wait_seconds", "model", "m").GetHistogram()
	if h.GetSampleCount() != 2 || !(h.GetSampleSum() > 0) || h.GetSampleSum() > 2*elapsed {
		t.Fatalf("iop_queue_wait_seconds{model=m}: %d waits summing %vs, want 2 within %vs each", h.GetSampleCount(), h.GetSampleSum(), elapsed)
	}
}

// seriesOf returns the series of family name whose labels are exactly the
// name/value pairs given.
func seriesOf(t *testing.T, f *fixture, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel())*2 != len(labels) {
				continue
			}
			for i, l := range m.GetLabel() {
				if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
					continue series
				}
			}
			return m
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}

func counterValue(t *testing.T, f *fixture, name string, labels ...string) float64 {
	t.Helper()
	return seriesOf(t, f, name, labels...).GetCounter().GetValue()
}
