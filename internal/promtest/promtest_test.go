package promtest

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Series keys every kind it reads by name and sorted labels, with the
// value a test compares: a counter's total, a gauge's level, a
// histogram's count.
func TestSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"z", "a"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds"}, []string{"m"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("1", "2").Add(3)
	g.Set(-4)
	h.WithLabelValues("x").Observe(time.Second.Seconds())
	h.WithLabelValues("x").Observe(2)
	got := Series(t, reg)
	want := map[string]float64{"c_total,a=2,z=1": 3, "g": -4, "h_seconds,m=x": 2}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
