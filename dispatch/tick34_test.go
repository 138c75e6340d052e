package dispatch

import (
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// One renewal tick of the cluster loop (renew, liveness, pending figures)
// is one round trip under one deadline: on a Redis that takes 550 ms to
// answer each round trip, with a 1 s timeout, it ends after one round
// trip. Before, it made three calls, each with its own deadline, and took
// three round trips (1.65 s or more) while the loop woke no provider whose
// return another edge announced. The count of round trips tells them
// apart; the time (five timeouts at most) only catches a tick that hung.
func TestARenewalTickKeepsToOneDeadline(t *testing.T) {
	const timeout, pause = time.Second, 550 * time.Millisecond
	rs := testredis.Start(t)
	f, rdb, _ := liveClusterEdge(t, oneProviderCfg(t, 1), rs, rs.Addr, timeout)
	// Unpaused, it loads the scripts and warms the pool.
	if again, _ := f.d.renewLeases(renewOutcome{}); !again.IsZero() {
		t.Fatal("the unpaused renewal failed")
	}
	took, n := pausedCalls(t, f, rdb)(pause.Milliseconds(), func() { _, _ = f.d.renewLeases(renewOutcome{}) })
	t.Logf("renewal tick: %v, %d round trips", took, n)
	if took >= 5*timeout || n != 1 {
		t.Fatalf("a renewal tick, each round trip held %v: %v after %d round trips; want one, within %v", pause, took, n, 5*timeout)
	}
}
