package healthname

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The names themselves are what operators and their scripts read on both
// surfaces (/admin/status's health, the node's providers command): each
// state's exact word, and Parse reading it back.
func TestNamesAreTheDocumentedWords37m(t *testing.T) {
	for h, want := range map[iop.HealthState]string{
		iop.HealthState_HEALTH_STATE_UNSPECIFIED: "ok",
		iop.HealthState_HEALTH_STATE_OK:          "ok",
		iop.HealthState_HEALTH_STATE_DEGRADED:    "degraded",
		iop.HealthState_HEALTH_STATE_OFFLINE:     "offline",
		iop.HealthState_HEALTH_STATE_DRAINING:    "draining",
	} {
		if got := Of(h); got != want {
			t.Errorf("Of(%s) = %q, want %q", h, got, want)
		}
		if h != iop.HealthState_HEALTH_STATE_UNSPECIFIED && Parse(want) != h {
			t.Errorf("Parse(%q) = %s, want %s", want, Parse(want), h)
		}
	}
}
