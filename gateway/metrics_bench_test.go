package gateway

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkRequestMetrics is the series one tunnelled request records.
func BenchmarkRequestMetrics(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	for b.Loop() {
		m.firstToken("qwen-7b", routeTunnel, 30*time.Millisecond)
		m.usage("qwen-7b", 48, 64)
		m.request("qwen-7b", routeTunnel, "200", 80*time.Millisecond)
	}
}
