package gateway

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/internal/promtest"
)

// Every series is recorded under all of its own label values: the
// children cached for one tuple (seriescache) are never taken for another
// that shares some of its labels.
func TestSeriesByEveryLabel42m(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.request("a", "tunnel", "200", time.Second)
	m.request("a", "run", "200", time.Second)
	m.request("a", "run", "500", time.Second)
	m.request("b", "tunnel", "200", time.Second)
	m.firstToken("a", "tunnel", time.Second)
	m.firstToken("b", "tunnel", time.Second)
	m.firstToken("b", "run", time.Second)
	m.usage("a", 3, 5)
	m.usage("b", 7, 0)
	m.surface("openai", "200")
	m.surface("openai", "429")
	m.surface("anthropic", "200")
	m.cancelled(CancelTimeout)
	m.cancelled(CancelClientDisconnect)
	m.cancelled(CancelClientDisconnect)

	got := promtest.Series(t, reg)
	for key, want := range map[string]float64{
		"iop_requests_total,code=200,model=a,route=tunnel":         1,
		"iop_requests_total,code=200,model=a,route=run":            1,
		"iop_requests_total,code=500,model=a,route=run":            1,
		"iop_requests_total,code=200,model=b,route=tunnel":         1,
		"iop_request_duration_seconds,model=a,route=tunnel":        1,
		"iop_request_duration_seconds,model=a,route=run":           2,
		"iop_request_duration_seconds,model=b,route=tunnel":        1,
		"iop_time_to_first_token_seconds,model=a,route=tunnel":     1,
		"iop_time_to_first_token_seconds,model=b,route=tunnel":     1,
		"iop_time_to_first_token_seconds,model=b,route=run":        1,
		"iop_tokens_total,kind=prompt,model=a":                     3,
		"iop_tokens_total,kind=completion,model=a":                 5,
		"iop_tokens_total,kind=prompt,model=b":                     7,
		"iop_surface_requests_total,code=200,surface=openai":       1,
		"iop_surface_requests_total,code=429,surface=openai":       1,
		"iop_surface_requests_total,code=200,surface=anthropic":    1,
		"iop_cancellations_total,reason=" + CancelTimeout:          1,
		"iop_cancellations_total,reason=" + CancelClientDisconnect: 2,
		"iop_cancellations_total,reason=" + CancelAdmin:            0,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
}
