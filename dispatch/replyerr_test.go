package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// refusalWarnings is the returner's warnings of batches Redis refused.
func refusalWarnings(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("cluster ledger refused updates").FilterLevelExact(zapcore.WarnLevel).All()
}

// A return Redis refuses (the lease key was overwritten with a value of
// another type) is told as a refusal of that kind, once: Redis answered,
// so it is no outage, and later refusals of the same kind within
// cluster.RefusalLogEvery are counted at debug level. The old code logged
// the batch as unanswered (debug) and reported an outage of it at Close.
func TestClusterReturnerErrorReplyIsNoOutage(t *testing.T) {
	rs := testredis.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	f, led := ledgerFixture(t, oneProviderCfg(t, 2),
		cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	defer led.Close()
	f.up("n")
	a := mustAcquire(t, f.d, Request{Model: "m"})
	b := mustAcquire(t, f.d, Request{Model: "m"})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), cluster.Key("n", "p"), "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a.Release(ReasonCompleted)
	waitFor(t, "the refusal's warning", func() bool { return len(refusalWarnings(logs)) == 1 })
	if kind := refusalWarnings(logs)[0].ContextMap()["kind"]; kind != "WRONGTYPE" {
		t.Fatalf("refusal of kind %v, want WRONGTYPE", kind)
	}
	b.Release(ReasonCompleted)
	waitFor(t, "the second refusal", func() bool {
		return logs.FilterMessageSnippet("cluster ledger refused updates").Len() == 2
	})
	if n := len(refusalWarnings(logs)); n != 1 {
		t.Fatalf("%d refusals of one kind warned of within a minute, want 1", n)
	}
	f.d.Close()
	if all, _ := applyFailures(logs); all != 0 {
		t.Fatalf("%d refused batches logged as unanswered", all)
	}
	if n := logs.FilterMessageSnippet("cluster ledger updates not applied until").Len(); n != 0 {
		t.Fatalf("refused batches reported as an outage (%d warnings)", n)
	}
}

// The re-adds of a batch Redis answered with an error reply are known
// (not unsure): their leases' returns are not fenced. A refusal also ends
// an outage (Redis answers again).
func TestClusterRefusedBatchMarksNoReaddUnsure(t *testing.T) {
	rs := testredis.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	broken := cluster.Key("n", "broken")
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), broken, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st := newReturnerState()
	defer st.timer.Stop()
	st.outage.record(f.d.log, 1, 0, cluster.ErrUnavailable) // an outage open
	f.d.applyBatch(st, []cluster.Update{
		{Kind: cluster.OpReadd, Key: cluster.Key("n", "p"), ID: "e1/x"},
		{Kind: cluster.OpReturn, Key: broken, ID: "e1/y"},
	}, time.Minute)
	if len(st.unsure) != 0 {
		t.Fatalf("a refused batch's re-add recorded as unsure: %v", st.unsure)
	}
	if st.outage.batches != 0 || logs.FilterMessageSnippet("until Redis answered again").Len() != 1 {
		t.Fatalf("the refusal did not end the open outage (%d batches still counted)", st.outage.batches)
	}
}
