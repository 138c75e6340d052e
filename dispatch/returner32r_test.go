package dispatch

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// returnOf is a batch of one plain return of lease id on n/p.
func returnOf(id string) []cluster.Update {
	return []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "p"), ID: id}}
}

// makeDue makes the kept return id due now (its retry time come).
func makeDue(t *testing.T, st *returnerState, id string) {
	t.Helper()
	r, ok := st.lost[id]
	if !ok {
		t.Fatalf("return %s not kept", id)
	}
	r.retryAt = time.Now()
	st.lost[id] = r
	st.retryAt = r.retryAt
}

// returnerOnRedis is a returner state (its timer stopped at the test's
// end) of a dispatcher whose ledger is on a fresh redis-server (see
// observedLedger).
func returnerOnRedis(t *testing.T) (*testredis.Server, *fixture, *observer.ObservedLogs, *returnerState) {
	t.Helper()
	rs := testredis.Start(t)
	f, logs := observedLedger(t, rs.Addr)
	st := newReturnerState()
	t.Cleanup(func() { st.timer.Stop() })
	return rs, f, logs, st
}

// refusedKept sends the return of lease id alone on st while Redis is
// read-only, and checks that it was kept, refused, with no outage.
func refusedKept(t *testing.T, rs *testredis.Server, f *fixture, st *returnerState, id string) {
	t.Helper()
	restore := rs.ReadOnly(t)
	f.d.applyBatch(st, returnOf(id), time.Minute)
	restore()
	if r, ok := st.lost[id]; !ok || r.retryAt.IsZero() || st.outage.batches != 0 {
		t.Fatalf("the refused return kept: %v (%+v), %d failed batches; want it kept waiting, no outage", ok, r, st.outage.batches)
	}
}

// A return lost in one outage, refused when that outage ended, and sent
// again into a second outage counts in the second: the outages' numbers
// go on across their ends. Numbered from zero again, the second outage
// would take the first one's number and leave the return out of its
// warning.
func TestReturnLostInAnEarlierOutageCountsInTheNext(t *testing.T) {
	rs, f, _, st := returnerOnRedis(t)
	const ttl = time.Minute
	rs.Stop()
	f.d.applyBatch(st, returnOf("e1/x"), ttl) // outage 1: x lost
	rs.Restart()
	restore := rs.ReadOnly(t)
	f.d.applyBatch(st, returnOf("e1/y"), ttl) // answered: outage 1 over, x and y refused
	restore()
	if st.outage.batches != 0 || len(st.lost) != 2 {
		t.Fatalf("after the refused batch: %d failed batches, kept %v; want no outage, x and y kept", st.outage.batches, st.lost)
	}
	makeDue(t, st, "e1/x")
	rs.Stop()
	f.d.applyBatch(st, returnOf("e1/z"), ttl) // outage 2: z, and x resent
	if st.outage.batches != 1 || st.outage.updates != 2 {
		t.Fatalf("outage 2: %d failed batches of %d updates, want 1 of 2 (z, and x sent again)", st.outage.batches, st.outage.updates)
	}
}

// While an outage is open, a kept return whose retry time has come is
// not sent on the timer before the probe: every send would wait out the
// ledger's timeout, and the probe sends the kept returns once Redis
// answers.
func TestKeptReturnNotRetriedBeforeTheOutagesProbe(t *testing.T) {
	_, f, _, st := returnerOnRedis(t)
	const ttl = time.Minute
	st.lost.keep(returnOf("e1/x"), nil, time.Now(), ttl)
	st.outage.batches, st.outage.serial = 1, 1
	st.probeAt = time.Now().Add(time.Hour)
	st.retryAt = st.lost.due(time.Now())
	f.d.returnerTick(st, ttl)
	if _, ok := st.lost["e1/x"]; !ok || st.outage.batches != 1 {
		t.Fatalf("kept %v, %d failed batches; want x still kept, the outage open (nothing sent before the probe)", st.lost, st.outage.batches)
	}
}

// Once the last kept return is applied the retry time is cleared: left
// set in the past, the timer would fire again at once, and again, for as
// long as the edge stays idle.
func TestReturnerRetryTimeClearedWhenNothingIsKept(t *testing.T) {
	rs, f, _, st := returnerOnRedis(t)
	const ttl = time.Minute
	refusedKept(t, rs, f, st, "e1/x")
	makeDue(t, st, "e1/x")
	f.d.returnerTick(st, ttl) // x sent alone, applied
	if len(st.lost) != 0 || !st.retryAt.IsZero() {
		t.Fatalf("kept %v, retry at %v; want nothing kept, no retry time", st.lost, st.retryAt)
	}
}

// Once Close has cancelled the dispatcher, a kept return due is not sent
// on the timer: the shutdown flush sends it (with the others, fenced as
// needed) within its own bound.
func TestKeptReturnNotRetriedOnTheTimerAfterClose(t *testing.T) {
	rs, f, _, st := returnerOnRedis(t)
	const ttl = time.Minute
	refusedKept(t, rs, f, st, "e1/x")
	makeDue(t, st, "e1/x")
	f.d.Close()
	f.d.returnerTick(st, ttl)
	if _, ok := st.lost["e1/x"]; !ok {
		t.Fatal("a kept return was sent on the timer after Close")
	}
}

// The refusals the returner held back are told at shutdown, with those of
// the shutdown flush, in one warning: its refusals before Close (a kept
// return sent again and refused again, within the minute of the first
// warning) are not lost with the process.
func TestShutdownTellsTheReturnersHeldBackRefusals(t *testing.T) {
	rs := testredis.Start(t)
	f, logs, _, _ := idleRefusedCluster(t, rs)
	waitFor(t, "a refused resend held back", func() bool {
		return logs.FilterMessageSnippet("cluster ledger refused updates").Len() >= 2
	})
	f.d.Close()
	warns := refusalWarnings(logs)
	if len(warns) != 2 {
		t.Fatalf("%d refusal warnings, want 2 (the first refusal, then the held-back ones at shutdown)", len(warns))
	}
	if n, _ := warns[1].ContextMap()["batches"].(int64); n < 2 {
		t.Fatalf("the shutdown's warning tells %d refused batches, want the ones held back before Close and the flush's", n)
	}
}

// The returner's refusal log takes the ledger's interval before it
// records a refused batch, not only on its timer: two batches refused
// more than the interval apart, with no tick between them, are two
// warnings.
func TestReturnerRefusalsFollowTheLedgersIntervalBetweenTicks(t *testing.T) {
	rs, f, logs, st := returnerOnRedis(t)
	f.d.ledger.SetRefusalLogEvery(time.Nanosecond) // a round trip is longer
	restore := rs.ReadOnly(t)
	defer restore()
	f.d.applyBatch(st, returnOf("e1/x"), time.Minute)
	f.d.applyBatch(st, returnOf("e1/y"), time.Minute)
	if n := len(refusalWarnings(logs)); n != 2 {
		t.Fatalf("%d refusal warnings for two batches refused an interval apart, want 2", n)
	}
}

// An outage that follows refusals which followed an outage is warned of
// again: Redis answered the refusals in between, so the second outage is
// one of its own, not the first one going on (told at debug level).
func TestRenewalOutageAfterRefusalsAfterAnOutageIsWarned(t *testing.T) {
	rs := testredis.Start(t)
	// Renewals every 20 s: the loop's own do not run meanwhile (its
	// first was answered: observedLedger).
	f, logs := observedLedger(t, rs.Addr)
	var out renewOutcome
	rs.Stop()
	_, out = f.d.renewLeases(out)
	rs.Restart()
	restore := rs.ReadOnly(t)
	_, out = f.d.renewLeases(out)
	restore()
	rs.Stop()
	_, out = f.d.renewLeases(out)
	rs.Restart()
	warned := logs.FilterMessage("cluster lease renewal failed").FilterLevelExact(zapcore.WarnLevel).Len()
	if warned != 2 || out != (renewOutcome{last: renewUnanswered, unanswered: true, refused: true}) {
		t.Fatalf("%d outage warnings, outcome %+v; want 2 (each outage), all three failures remembered", warned, out)
	}
}

// The kept returns are sent again from the earliest retry time on: due
// is the soonest of the refused ones' times, and now once one is past
// (or lost without an answer: no time).
func TestKeptReturnsDueAtTheEarliest(t *testing.T) {
	now := time.Now()
	lost := lostReturns{
		"e/late":  {key: "k", at: now, retryAt: now.Add(4 * time.Second), refusals: 2},
		"e/early": {key: "k", at: now, retryAt: now.Add(2 * time.Second), refusals: 1},
	}
	if due := lost.due(now); !due.Equal(now.Add(2 * time.Second)) {
		t.Fatalf("due at +%v, want the earliest retry, +2s", due.Sub(now))
	}
	lost["e/lost"] = lostReturn{key: "k", at: now}
	if due := lost.due(now); !due.Equal(now) {
		t.Fatalf("due at +%v with a return lost without an answer, want now", due.Sub(now))
	}
}

// Kept returns left over by a batch that could carry only ledgerBatch of
// them are sent on the timer right away, not with the next batch (an
// idle edge may send none until their leases expire).
func TestKeptReturnsBeyondABatchAreSentOnTheTimer(t *testing.T) {
	_, f, _, st := returnerOnRedis(t)
	const ttl = time.Minute
	var lost []cluster.Update
	for i := range ledgerBatch + 1 {
		lost = append(lost, returnOf(fmt.Sprintf("e1/%d", i))...)
	}
	st.lost.keep(lost, nil, time.Now(), ttl) // lost without an answer
	f.d.applyBatch(st, nil, ttl)
	if len(st.lost) != 1 || st.retryAt.IsZero() || st.retryAt.After(time.Now()) {
		t.Fatalf("after one batch: kept %d, retry at %v; want 1 kept, due now", len(st.lost), st.retryAt)
	}
	f.d.returnerTick(st, ttl)
	if len(st.lost) != 0 {
		t.Fatalf("kept %v after the timer's send, want none", st.lost)
	}
}
