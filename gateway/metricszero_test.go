package gateway_test

import (
	"testing"

	"github.com/iop-gateway/iop/config"
)

// Every cancellation reason is exported at zero before the first
// cancellation of its kind, so that rate() and increase() see that one.
func TestCancellationReasonsExportedAtZero(t *testing.T) {
	e := startEdge(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo")))
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "iop_cancellations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" {
					seen[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	for _, reason := range []string{"client_disconnect", "timeout", "write_error", "admin"} {
		if v, ok := seen[reason]; !ok || v != 0 {
			t.Errorf("iop_cancellations_total{reason=%q}: present %v, value %v; want present at 0", reason, ok, v)
		}
	}
	if len(seen) != 4 {
		t.Errorf("reasons %v, want exactly the four of the contract", seen)
	}
}
