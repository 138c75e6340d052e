// Package promtest reads what a Prometheus registry holds, for tests
// that check every series a component records at once.
package promtest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Series gathers reg and returns each series' value keyed by its family
// name and its labels as Prometheus sorts them, "name,label=value,…": a
// counter's or gauge's value, a histogram's sample count. Other kinds are
// left out. A series never recorded is absent (its value reads as 0).
func Series(t testing.TB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var key strings.Builder
			key.WriteString(mf.GetName())
			for _, l := range m.GetLabel() {
				key.WriteString("," + l.GetName() + "=" + l.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				got[key.String()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[key.String()] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				got[key.String()] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return got
}
