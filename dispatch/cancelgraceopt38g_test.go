package dispatch

import (
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

// Options.CancelGrace replaces the base of the cancel grace: zero or
// negative keeps the default (5 s), a provider's kill_grace_ms plus the
// margin still raises it, and the cap still bounds it.
func TestCancelGraceBaseFromOptions38g(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		kill any
		want time.Duration
	}{
		{300 * time.Millisecond, nil, 300 * time.Millisecond},
		{0, nil, baseCancelGrace},
		{-time.Second, nil, baseCancelGrace},
		{300 * time.Millisecond, "junk", 300 * time.Millisecond},
		{300 * time.Millisecond, 1000, time.Second + cancelGraceMargin},
		{0, 1000, baseCancelGrace},
		{10 * time.Second, 1000, 10 * time.Second},
		{300 * time.Millisecond, 3600000, maxCancelGrace},
		{time.Hour, nil, maxCancelGrace},
	} {
		spec := config.ProviderSpec{Name: "p", Type: "mock", Capacity: 1}
		if tc.kill != nil {
			spec.Extra = map[string]any{"kill_grace_ms": tc.kill}
		}
		if got := cancelGraceFrom(tc.base, spec); got != tc.want {
			t.Errorf("base %s, kill_grace_ms %v: cancel grace %s, want %s", tc.base, tc.kill, got, tc.want)
		}
	}
}

// The option reaches the leases a dispatcher grants, also after a reload
// (which sets every provider's spec again): on a provider without a kill
// grace the lease's CancelGrace is the option's base (the default without
// it), and a kill grace still raises it.
func TestLeaseCancelGraceFromOptions38g(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  time.Duration
		kill any
		want time.Duration
	}{
		{"short base", 300 * time.Millisecond, nil, 300 * time.Millisecond},
		{"no option", 0, nil, baseCancelGrace},
		{"short base, kill grace", 300 * time.Millisecond, 1000, time.Second + cancelGraceMargin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := func(capacity int) *config.Edge {
				c := buildCfg(t, oneNodeCfg(t, capacity), oneNodeModels)
				if tc.kill != nil {
					c.Nodes[0].Providers[0].Extra = map[string]any{"kill_grace_ms": tc.kill}
				}
				return c
			}
			f := &fixture{t: t, bus: &recBus{}}
			f.d = New(cfg(1), Options{Bus: f.bus, CancelGrace: tc.opt})
			t.Cleanup(f.d.Close)
			f.d.Reload(cfg(2))
			f.up("n1")
			l := mustAcquire(t, f.d, Request{Model: "m"})
			defer l.Release(ReasonCompleted)
			if l.CancelGrace != tc.want {
				t.Fatalf("lease CancelGrace = %s, want %s", l.CancelGrace, tc.want)
			}
		})
	}
}
