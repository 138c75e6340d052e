package dispatch

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// shortLostRetry sets lostRetry to d for the test: called before the
// dispatcher starts, so that it is restored after the dispatcher's Close
// (cleanups run last first).
func shortLostRetry(t *testing.T, d time.Duration) {
	t.Helper()
	old := lostRetry
	lostRetry = d
	t.Cleanup(func() { lostRetry = old })
}

// observedLedger is a cluster fixture on the Redis at addr (leases of a
// minute, a 1 s timeout, node n with provider p of capacity 1) whose logs
// are observed; when a Redis answers there, once the cluster loop's
// first tick has been answered (awaitFirstTick).
func observedLedger(t *testing.T, addr string) (*fixture, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	live := preloadTick(t, addr)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	if live {
		// The loop's first tick, at its start, must not meet the
		// outages and refusals the tests make.
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		awaitFirstTick(t, rdb)
	}
	return f, logs
}

// idleRefusedCluster is a cluster fixture on rs (leases of a minute,
// logs observed, lostRetry shortened to 20 ms) whose one lease Redis
// refused to return (read-only): it waits for that refusal's warning, and
// returns the lease's ledger id. Nothing else goes out after it.
func idleRefusedCluster(t *testing.T, rs *testredis.Server) (*fixture, *observer.ObservedLogs, string, func()) {
	t.Helper()
	shortLostRetry(t, 20*time.Millisecond)
	f, logs := observedLedger(t, rs.Addr)
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	id := l.ledgerID
	restore := rs.ReadOnly(t)
	l.Release(ReasonCompleted)
	waitFor(t, "the return's refusal", func() bool { return len(refusalWarnings(logs)) == 1 })
	return f, logs, id, restore
}

// A plain return Redis refused on its first send is kept and sent again
// on the returner's own timer, with no other batch going out: once Redis
// takes writes again the slot comes back within a few retry periods, not
// a TTL later. The old code dropped it (the lease held its slot in every
// edge's count for the TTL); kept, it was sent again only with a later
// batch, which an idle edge never sends.
func TestClusterRefusedReturnIsRetriedOnAnIdleEdge(t *testing.T) {
	rs := testredis.Start(t)
	f, logs, id, restore := idleRefusedCluster(t, rs)
	// Sent again, and refused again, while read-only: the retries back
	// off, and the batches refused are counted.
	waitFor(t, "two more refused sends of the kept return", func() bool {
		return logs.FilterMessageSnippet("cluster ledger refused updates").Len() >= 3
	})
	restore()
	waitFor(t, "the slot back in the ledger", func() bool {
		return !inLedger(t, rs.Client(t), cluster.Key("n", "p"), id)
	})
	mustAcquire(t, f.d, Request{Model: "m", NoWait: true}).Release(ReasonCompleted)
}

// Each refusal in a row doubles a kept return's wait before it is sent
// again, from lostRetry up to lostRetry<<lostRetryShifts: a key of
// another type refuses it for as long as it stays, and the retries must
// not spin. A batch's own return refused starts at lostRetry.
func TestRefusedReturnRetriesBackOff(t *testing.T) {
	now := time.Now()
	lost := lostReturns{}
	send := []cluster.Update{{Kind: cluster.OpReturn, Key: "k", ID: "e/1"}}
	lost.answered(send, 1, []int{0}, nil, now, time.Minute)
	want := lostRetry
	for i := range 8 {
		r, ok := lost["e/1"]
		if !ok || !r.retryAt.Equal(now.Add(want)) {
			t.Fatalf("after %d refusals: kept %v, retry at +%v, want +%v", i+1, ok, r.retryAt.Sub(now), want)
		}
		if got := lost.due(now); !got.Equal(r.retryAt) {
			t.Fatalf("due %v, want the retry time %v", got, r.retryAt)
		}
		lost.answered(send, 0, []int{0}, nil, now, time.Minute)
		want = min(2*want, lostRetry<<lostRetryShifts)
	}
	lost.answered(send, 0, nil, nil, now, time.Minute)
	if len(lost) != 0 || !lost.due(now).IsZero() {
		t.Fatalf("kept %v after the return was applied, want none", lost)
	}
}

// With nothing kept, the returner's timer is not armed for a retry; with
// a return lost without an answer, no retry is sent while the outage is
// open (the probe resends it once Redis answers).
func TestLostRetryTimerOnlyWithoutAnOutage(t *testing.T) {
	st := newReturnerState()
	defer st.timer.Stop()
	st.arm()
	if !st.timerAt.IsZero() {
		t.Fatalf("timer armed at %v with nothing kept", st.timerAt)
	}
	now := time.Now()
	st.lost["e/1"] = lostReturn{key: "k", at: now}
	st.retryAt = st.lost.due(now)
	st.outage.batches, st.probeAt = 1, now.Add(time.Hour)
	st.arm()
	if !st.timerAt.Equal(st.probeAt) {
		t.Fatalf("timer at %v during an outage, want the probe's %v", st.timerAt, st.probeAt)
	}
}

// A return Redis refused, sent again into an open outage, counts in it:
// the old code counted resent returns only in the batch opening an
// outage, so the outage's warning left it out. One lost in the outage
// and resent into it still counts once.
func TestRefusedReturnResentIntoAnOutageCounts(t *testing.T) {
	rs, f, logs, st := returnerOnRedis(t)
	const ttl = time.Minute
	refusedKept(t, rs, f, st, "e1/refused")
	rs.Stop()
	f.d.applyBatch(st, returnOf("e1/lost"), ttl) // opens the outage: 1 update
	r := st.lost["e1/refused"]
	if r.retryAt.IsZero() {
		t.Fatal("the refused return was resent with the batch before its retry time")
	}
	r.retryAt = time.Now() // its retry time come
	st.lost["e1/refused"] = r
	f.d.applyBatch(st, returnOf("e1/next"), ttl) // the refused and the lost resent
	if st.outage.batches != 2 || st.outage.updates != 3 {
		t.Fatalf("%d failed batches of %d updates, want 2 of 3 (lost, then next and the refused one resent; lost not again)",
			st.outage.batches, st.outage.updates)
	}
	rs.Restart()
	f.d.applyBatch(st, nil, ttl)
	warn := logs.FilterMessageSnippet("cluster ledger updates not applied until Redis answered again").All()
	if len(warn) != 1 || warn[0].ContextMap()["updates"] != int64(3) {
		t.Fatalf("outage warnings %v, want one of 3 updates", warn)
	}
}

// The first renewal accepted after an outage and then refusals tells of
// both: the old code said only "accepts lease renewals again", and the
// outage's end went untold. Refusals then an outage are told both too.
func TestRenewalRecoveryTellsOfBothOutageAndRefusals(t *testing.T) {
	for _, tc := range []struct {
		name       string
		outageLast bool
	}{{"outage then refusals", false}, {"refusals then outage", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rs := testredis.Start(t)
			// Renewals every 20 s: the loop's own do not run meanwhile (its
			// first was answered: observedLedger).
			f, logs := observedLedger(t, rs.Addr)
			outage := func(last renewOutcome) renewOutcome {
				rs.Stop()
				_, out := f.d.renewLeases(last)
				rs.Restart()
				return out
			}
			refusals := func(last renewOutcome) renewOutcome {
				restore := rs.ReadOnly(t)
				defer restore()
				_, out := f.d.renewLeases(last)
				return out
			}
			var out renewOutcome
			if tc.outageLast {
				out = outage(refusals(out))
			} else {
				out = refusals(outage(out))
			}
			if _, out = f.d.renewLeases(out); out != (renewOutcome{}) {
				t.Fatalf("the renewal after both: %+v, want accepted", out)
			}
			if answers, accepts := renewalRecoveries(logs); answers != 1 || accepts != 1 {
				t.Fatalf("recoveries told: %d answers again, %d accepts again; want 1 and 1", answers, accepts)
			}
		})
	}
}

// The returner's refusals held back are warned of on its timer once the
// interval the ledger's test setter gave has passed, as the ledger's own
// are (the returner's tick flushed on the fixed minute, out of reach of a
// test).
func TestReturnerRefusalLogFollowsTheLedgersInterval(t *testing.T) {
	f, logs := observedLedger(t, deadAddr(t))
	st := newReturnerState()
	defer st.timer.Stop()
	refused := errors.New("refused")
	warned := time.Now().Add(-time.Second)
	st.refused.Every = time.Hour
	st.refused.Record(f.d.log, 1, refused, warned)
	st.refused.Record(f.d.log, 2, refused, warned.Add(time.Millisecond))
	f.d.ledger.SetRefusalLogEvery(time.Hour)
	f.d.returnerTick(st, time.Minute)
	if n := len(refusalWarnings(logs)); n != 1 {
		t.Fatalf("%d refusal warnings within the hour, want 1", n)
	}
	f.d.ledger.SetRefusalLogEvery(100 * time.Millisecond)
	f.d.returnerTick(st, time.Minute)
	warns := refusalWarnings(logs)
	if len(warns) != 2 || warns[1].ContextMap()["updates"] != int64(2) {
		t.Fatalf("refusal warnings %v, want the held-back one of 2 updates told by the tick", warns)
	}
}
