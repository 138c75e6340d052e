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

// applyFailures counts the returner's log lines of failed batches in logs,
// and those of them at warn level or above.
func applyFailures(logs *observer.ObservedLogs) (all, warned int) {
	for _, e := range logs.All() {
		if e.Message != "cluster ledger updates not applied" {
			continue
		}
		all++
		if e.Level >= zapcore.WarnLevel {
			warned++
		}
	}
	return all, warned
}

// outageSummaries is the returner's end-of-outage warnings in logs.
func outageSummaries(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("cluster ledger updates not applied until Redis answered again").All()
}

// While Redis does not answer, every batch of returns the returner sends
// fails: the outage is one warning, given when a batch is applied again,
// with how many batches and updates were lost; the failures themselves
// are logged at debug level. The old code warned once per failed batch,
// one line per lease released during the outage.
func TestClusterReturnerOutageWarnsOnce(t *testing.T) {
	rs := testredis.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	f := closedLedgerFixture(t, oneProviderCfg(t, 3),
		cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	f.up("n")
	held := mustAcquire(t, f.d, Request{Model: "m"})
	defer held.Release(ReasonCompleted)
	a := mustAcquire(t, f.d, Request{Model: "m"})
	b := mustAcquire(t, f.d, Request{Model: "m"})

	rs.Stop()
	// One batch each: the second is released once the first has failed.
	a.Release(ReasonCompleted)
	waitFor(t, "the first return failed", func() bool { all, _ := applyFailures(logs); return all == 1 })
	b.Release(ReasonCompleted)
	waitFor(t, "the second return failed", func() bool { all, _ := applyFailures(logs); return all == 2 })
	if _, warned := applyFailures(logs); warned != 0 {
		t.Fatalf("%d failed batches of one outage logged at warn level, want 0 (one summary at its end)", warned)
	}
	if n := len(outageSummaries(logs)); n != 0 {
		t.Fatalf("outage summarised %d times while Redis was still down", n)
	}

	// The restarted Redis lost the held lease: the renewal puts it back
	// through the returner, whose batch is then applied.
	rs.Restart()
	waitFor(t, "the outage's warning", func() bool { return len(outageSummaries(logs)) == 1 })
	e := outageSummaries(logs)[0]
	if e.Level != zapcore.WarnLevel {
		t.Fatalf("outage summary at %v, want warn", e.Level)
	}
	fields := e.ContextMap()
	if fields["batches"] != int64(2) || fields["updates"] != int64(2) {
		t.Fatalf("outage summary counts %v batches, %v updates; want 2 and 2", fields["batches"], fields["updates"])
	}
}

// An outage still on at Close is summarised then: its warning is not lost
// with the returner.
func TestClusterReturnerOutageSummarisedAtClose(t *testing.T) {
	rs := testredis.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	f, led := ledgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	defer led.Close()
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs.Stop()
	l.Release(ReasonCompleted)
	waitFor(t, "the return failed", func() bool { all, _ := applyFailures(logs); return all == 1 })
	f.d.Close()
	got := logs.FilterMessageSnippet("cluster ledger updates not applied until shutdown").All()
	if len(got) != 1 || got[0].Level != zapcore.WarnLevel || got[0].ContextMap()["updates"] != int64(1) {
		t.Fatalf("outage summaries at Close: %v, want one warning of 1 update", got)
	}
}
