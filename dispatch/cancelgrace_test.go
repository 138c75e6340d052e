package dispatch

import (
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

// A lease's CancelGrace outlasts its provider's kill grace (SIGTERM, then
// SIGKILL after kill_grace_ms) by a margin, so the node has freed its slot
// before the lease goes back; it never drops below the base nor exceeds
// the cap.
func TestCancelGraceOutlastsKillGrace(t *testing.T) {
	for _, tc := range []struct {
		kill any
		want time.Duration
	}{
		{nil, baseCancelGrace},
		{"junk", baseCancelGrace},
		{-5, baseCancelGrace},
		{1000, baseCancelGrace},
		{10000, 10*time.Second + cancelGraceMargin},
		{"20000", 20*time.Second + cancelGraceMargin},
		{3600000, maxCancelGrace},
	} {
		spec := config.ProviderSpec{Name: "p", Type: "mock", Capacity: 1}
		if tc.kill != nil {
			spec.Extra = map[string]any{"kill_grace_ms": tc.kill}
		}
		if got := cancelGraceFrom(0, spec); got != tc.want {
			t.Errorf("kill_grace_ms %v: cancel grace %s, want %s", tc.kill, got, tc.want)
		}
	}

	cfg := buildCfg(t, oneNodeCfg(t, 1), oneNodeModels)
	cfg.Nodes[0].Providers[0].Extra = map[string]any{"kill_grace_ms": 10000}
	f := newFixture(t, cfg, nil)
	f.up("n1")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	defer l.Release(ReasonCompleted)
	if want := 10*time.Second + cancelGraceMargin; l.CancelGrace != want {
		t.Fatalf("lease CancelGrace = %s, want %s", l.CancelGrace, want)
	}
}
