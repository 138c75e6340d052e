package dispatch

import (
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// deadLedgerFixture is a closed-at-cleanup fixture whose ledger, of a
// minute's TTL, dials a loopback port nothing listens on: every batch and
// probe fails at once.
func deadLedgerFixture(t *testing.T) *fixture {
	t.Helper()
	return closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: deadAddr(t), TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"}, Options{})
}

// A failed batch with a re-add arms the returner's timer for the outage
// probe (outageProbe on), not for the sweep of its unsure entry a TTL on,
// which would hold the outage's report back a TTL. A failed batch with no
// re-add records nothing unsure; its returns are kept to be sent again
// (lostReturns), swept a TTL on, the timer still set for the probe.
func TestReturnerFailedBatchArmsTheProbeBeforeTheSweep(t *testing.T) {
	const ttl = time.Minute
	f := deadLedgerFixture(t)
	st := newReturnerState()
	defer st.timer.Stop()
	f.d.applyBatch(st, []cluster.Update{{Kind: cluster.OpReadd, Key: cluster.Key("n", "p"), ID: "e1/lost"}}, ttl)
	if st.outage.batches != 1 || st.sweepAt.IsZero() || st.probeAt.IsZero() {
		t.Fatalf("failed batch: %d outage batches, sweep at %v, probe at %v; want 1 and both set", st.outage.batches, st.sweepAt, st.probeAt)
	}
	if !st.timerAt.Equal(st.probeAt) {
		t.Fatalf("timer at %v, want the probe's %v (the sweep is at %v)", st.timerAt, st.probeAt, st.sweepAt)
	}

	returns := newReturnerState()
	defer returns.timer.Stop()
	f.d.applyBatch(returns, []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "p"), ID: "e1/r"}}, ttl)
	if len(returns.unsure) != 0 || len(returns.lost) != 1 || returns.sweepAt.IsZero() || !returns.timerAt.Equal(returns.probeAt) {
		t.Fatalf("failed batch of returns: unsure %v, lost %v, sweep at %v, timer at %v; want none unsure, the return kept with its sweep armed, the probe's %v",
			returns.unsure, returns.lost, returns.sweepAt, returns.timerAt, returns.probeAt)
	}

	// The timer waits for a sweep (no outage open): a failed batch sets
	// it sooner, for the probe.
	sweeping := newReturnerState()
	defer sweeping.timer.Stop()
	sweeping.unsure["e1/old"] = time.Now()
	sweeping.sweepAt = time.Now().Add(ttl)
	sweeping.arm()
	f.d.applyBatch(sweeping, []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "p"), ID: "e1/r2"}}, ttl)
	if !sweeping.timerAt.Equal(sweeping.probeAt) {
		t.Fatalf("timer left at %v, want the sooner probe's %v", sweeping.timerAt, sweeping.probeAt)
	}
}

// A probe Redis does not answer is made again outageProbe later, not at
// once: the returner's timer never spins against a Redis that is down,
// nor at Close (the probe fails at once on the cancelled context).
func TestReturnerUnansweredProbeIsMadeAgainAfterOutageProbe(t *testing.T) {
	const ttl = time.Minute
	f := deadLedgerFixture(t)
	st := newReturnerState()
	defer st.timer.Stop()
	f.d.applyBatch(st, []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "p"), ID: "e1/r"}}, ttl)
	for _, closed := range []bool{false, true} {
		if closed {
			f.d.Close()
		}
		// The timer fired (the returner's loop clears timerAt) with the
		// probe due.
		st.probeAt, st.timerAt = time.Now().Add(-time.Millisecond), time.Time{}
		before := time.Now()
		f.d.returnerTick(st, ttl)
		if st.outage.batches != 1 {
			t.Fatalf("closed %v: an unanswered probe ended the outage", closed)
		}
		if st.probeAt.Before(before.Add(outageProbe)) || !st.timerAt.Equal(st.probeAt) {
			t.Fatalf("closed %v: next probe at %v (timer at %v), want at least %v on", closed, st.probeAt.Sub(before), st.timerAt, outageProbe)
		}
	}
}

// Unsure entries that come of age close together are swept at most eight
// times a TTL: the next sweep is at least TTL/8 on, even when the oldest
// entry left is a TTL old sooner.
func TestReturnerSweepsAtMostEightTimesATTL(t *testing.T) {
	const ttl = time.Minute
	f := deadLedgerFixture(t)
	st := newReturnerState()
	defer st.timer.Stop()
	now := time.Now()
	st.unsure["e1/old"] = now.Add(-ttl)
	st.unsure["e1/soon"] = now.Add(-ttl + ttl/16) // a TTL old in TTL/16
	st.sweepAt = now.Add(-time.Millisecond)
	f.d.returnerTick(st, ttl)
	if _, ok := st.unsure["e1/soon"]; !ok || len(st.unsure) != 1 {
		t.Fatalf("after the sweep unsure holds %v, want only e1/soon", st.unsure)
	}
	if st.sweepAt.Before(now.Add(ttl / 8)) {
		t.Fatalf("next sweep %v on, want at least TTL/8 (%v)", st.sweepAt.Sub(now), ttl/8)
	}
}

// An idle outage whose first probe Redis does not answer is still
// reported: the returner probes again every outageProbe, and warns once
// one is answered.
func TestClusterReturnerOutageReportedAfterAnUnansweredProbe(t *testing.T) {
	p, logs := oneFailedReturnThenIdle(t)
	waitFor(t, "a probe not answered", func() bool {
		return logs.FilterMessage("cluster ledger probe not answered").Len() > 0
	})
	p.restore()
	waitFor(t, "the outage's warning", func() bool { return len(outageSummaries(logs)) == 1 })
}
