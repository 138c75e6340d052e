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

// renewalFailures counts the renewal-failure log lines logs holds, and
// those of them at warn level or above.
func renewalFailures(logs *observer.ObservedLogs) (all, warned int) {
	for _, e := range logs.FilterMessage("cluster lease renewal failed").All() {
		all++
		if e.Level >= zapcore.WarnLevel {
			warned++
		}
	}
	return all, warned
}

// observedCluster is a cluster fixture on rs whose logs are observed,
// renewing every second: node n (ready) with provider p of capacity 1,
// model m on it.
func observedCluster(t *testing.T, rs *testredis.Server) (*fixture, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{Logger: zap.New(core)})
	f.up("n")
	return f, logs
}

// While Redis does not answer, the renewal is retried every 500 ms: an
// outage is one warning (the retries log at debug level), and the next
// outage, after Redis answered again, is a warning of its own. Warning on
// every retry wrote two lines a second per edge for as long as Redis was
// down, burying the rest of the log.
func TestClusterRenewalOutageWarnsOnce(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedCluster(t, rs)
	l := mustAcquire(t, f.d, Request{Model: "m"}) // a renewal with a lease to renew
	defer l.Release(ReasonCompleted)

	rs.Stop()
	waitFor(t, "three failed renewals", func() bool { all, _ := renewalFailures(logs); return all >= 3 })
	if _, warned := renewalFailures(logs); warned != 1 {
		t.Fatalf("%d renewal failures of one outage logged at warn level, want 1", warned)
	}
	rs.Restart()
	waitFor(t, "the renewal answered again", func() bool {
		return logs.FilterMessage("cluster lease renewal answers again").Len() == 1
	})
	rs.Stop()
	waitFor(t, "a second outage's warning", func() bool { _, warned := renewalFailures(logs); return warned == 2 })
}

// An edge that holds no lease has nothing to renew, and finds Redis down
// when it marks itself live: that outage is one warning too, and the
// edge does not say Redis answers again while it still does not.
func TestClusterOutageWithoutLeasesWarnsOnce(t *testing.T) {
	rs := testredis.Start(t)
	_, logs := observedCluster(t, rs)
	rs.Stop()
	waitFor(t, "three failed renewals", func() bool { all, _ := renewalFailures(logs); return all >= 3 })
	if _, warned := renewalFailures(logs); warned != 1 {
		t.Fatalf("%d renewal failures of one outage logged at warn level, want 1", warned)
	}
	if n := logs.FilterMessage("cluster lease renewal answers again").Len(); n != 0 {
		t.Fatalf("Redis said to answer again %d times while it was down", n)
	}
}
