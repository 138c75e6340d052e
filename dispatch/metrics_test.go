package dispatch

import (
	"testing"
)

// Every configured node's session outcomes and every provider's lease
// counters exist at zero before anything happened, so the first loss shows
// in rate() and increase().
func TestCountersExistAtZero(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}}, []tModel{{name: "m", cands: []string{"a/p"}}})
	f := newFixture(t, cfg, nil)
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			if m.GetCounter() != nil && m.GetCounter().GetValue() != 0 {
				t.Errorf("%s = %v before any event", key, m.GetCounter().GetValue())
			}
			have[key] = true
		}
	}
	want := []string{"iop_lease_acquired_total,node=a,provider=p"}
	for _, o := range sessionOutcomes {
		want = append(want, "iop_node_sessions_total,node=a,outcome="+o)
	}
	for _, r := range releaseReasons {
		want = append(want, "iop_lease_released_total,node=a,provider=p,reason="+string(r))
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("%s does not exist at start", w)
		}
	}
}
