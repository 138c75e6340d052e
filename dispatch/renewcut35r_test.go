package dispatch

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// renewRefusalWarnings are the warnings of renewals Redis refused.
func renewRefusalWarnings(logs *observer.ObservedLogs) int {
	return logs.FilterMessageSnippet("cluster ledger refused lease renewals").FilterLevelExact(zapcore.WarnLevel).Len()
}

// A tick whose renewals Redis refused and whose liveness reply was lost
// still tells of the refusal (warned, as any refused renewal), besides
// reading as an outage: Redis did answer the renewals with an error.
func TestARefusedRenewalWhoseLivenessReplyIsLostIsWarnedOf(t *testing.T) {
	rs := testredis.Start(t)
	p := newBudgetProxy(t, rs.Addr)
	core, logs := observer.New(zapcore.DebugLevel)
	preloadTick(t, rs.Addr)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: p.addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	f.up("n")
	awaitFirstTick(t, rs.Client(t))
	l := mustAcquire(t, f.d, Request{Model: "m"})
	t.Cleanup(func() { l.Release(ReasonCompleted) })
	if n := renewRefusalWarnings(logs); n != 0 {
		t.Fatalf("%d renewal refusals warned of before the tick", n)
	}
	out := refusedTickLosingLiveness(t, f, rs, p, l)
	if out.last != renewUnanswered || !out.refused {
		t.Fatalf("renewal refused, liveness reply lost: %+v; want an outage, the refusal kept", out)
	}
	if n := renewRefusalWarnings(logs); n != 1 {
		t.Fatalf("%d renewal refusals warned of, want the tick's one", n)
	}
}

// A tick that Redis did not answer at all, with leases held (renewals and
// liveness mark both unanswered), is an outage and nothing else: no
// refusal is recorded or warned of, and the renewal accepted after it
// tells only that Redis answers again.
func TestAnUnansweredTickWithLeasesIsNoRefusal(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedLedger(t, rs.Addr)
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	t.Cleanup(func() { l.Release(ReasonCompleted) })
	rs.Stop()
	_, out := f.d.renewLeases(renewOutcome{})
	rs.Restart()
	if out != (renewOutcome{last: renewUnanswered, unanswered: true}) {
		t.Fatalf("a tick Redis did not answer: %+v; want an outage only", out)
	}
	if _, out = f.d.renewLeases(out); out != (renewOutcome{}) {
		t.Fatalf("the tick after: %+v, want accepted", out)
	}
	if n := renewRefusalWarnings(logs); n != 0 {
		t.Fatalf("%d renewal refusals warned of after an outage", n)
	}
	if answers, accepts := renewalRecoveries(logs); answers != 1 || accepts != 0 {
		t.Fatalf("recoveries told: %d answers again, %d accepts again; want 1 and 0", answers, accepts)
	}
}
