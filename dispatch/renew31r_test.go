package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/internal/testredis"
)

// An outage that follows refused renewals, with no renewal accepted in
// between, is warned of: Redis answered the refusals, so the outage is
// news (the code before the thirty-first pass logged it at debug level
// only, as a retry of a warned outage).
func TestClusterOutageAfterRefusedRenewalsIsWarned(t *testing.T) {
	rs := testredis.Start(t)
	_, logs := observedCluster(t, rs)
	restore := rs.ReadOnly(t)
	waitFor(t, "a refused renewal", func() bool { return len(refusedRenewalWarnings(logs)) > 0 })
	rs.Stop()
	waitFor(t, "a failed renewal", func() bool { all, _ := renewalFailures(logs); return all > 0 })
	if _, warned := renewalFailures(logs); warned != 1 {
		t.Fatalf("%d warnings of the outage after refused renewals, want 1", warned)
	}
	rs.Restart()
	restore()
}
