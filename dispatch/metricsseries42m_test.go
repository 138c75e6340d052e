package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/internal/promtest"
)

// Each lease is counted under its own provider and reason, and each wait
// under its own model: the series are cached by every label value, not by
// the first tuple that reached one node, one resource or the dispatcher.
func TestLeaseSeriesByEveryLabel42m(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}},
		[]tModel{{name: "m1", cands: []string{"a/p"}}, {name: "m2", cands: []string{"a/q"}}})
	f := newFixture(t, cfg, nil)
	f.up("a")
	mustAcquire(t, f.d, Request{Model: "m1"}).Release(ReasonCompleted)
	mustAcquire(t, f.d, Request{Model: "m2"}).Release(ReasonError)
	mustAcquire(t, f.d, Request{Model: "m2"}).Release(ReasonCompleted)

	got := promtest.Series(t, f.reg)
	for key, want := range map[string]float64{
		"iop_lease_acquired_total,node=a,provider=p":                  1,
		"iop_lease_acquired_total,node=a,provider=q":                  2,
		"iop_lease_released_total,node=a,provider=p,reason=completed": 1,
		"iop_lease_released_total,node=a,provider=p,reason=error":     0,
		"iop_lease_released_total,node=a,provider=q,reason=error":     1,
		"iop_lease_released_total,node=a,provider=q,reason=completed": 1,
		"iop_queue_wait_seconds,model=m1":                             1,
		"iop_queue_wait_seconds,model=m2":                             2,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
}
