package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// refusedGrantWarnings and refusedRenewalWarnings are the warnings of
// takes and renewals Redis refused.
func refusedGrantWarnings(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("cluster ledger refused lease grants").FilterLevelExact(zapcore.WarnLevel).All()
}

func refusedRenewalWarnings(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("cluster ledger refused lease renewals").FilterLevelExact(zapcore.WarnLevel).All()
}

// A grant Redis refuses (a read-only replica: a failover left the edges
// on the old primary) gets 503 cluster_unavailable as when Redis does
// not answer: the edge cannot account for the lease. It is told to the
// operator as a refusal of its reply's kind, once a minute per kind, not
// as an outage; the grants that follow back off as after an outage. The
// old code reported it as Redis unavailable, with no warning naming it.
func TestClusterRefusedTakeIsUnavailableAndWarnedOnce(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedCluster(t, rs)
	restore := rs.ReadOnly(t)
	refuseTakes(t, f, 2)
	warns := refusedGrantWarnings(logs)
	if len(warns) != 1 {
		t.Fatalf("%d warnings of refused grants, want 1: %v", len(warns), warns)
	}
	if kind := warns[0].ContextMap()["kind"]; kind != "READONLY" {
		t.Fatalf("refused grant of kind %v, want READONLY", kind)
	}
	restore()
	l := func() *Lease {
		var l *Lease
		waitFor(t, "a grant once Redis takes writes again", func() bool {
			got, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true})
			l = got
			return err == nil
		})
		return l
	}()
	l.Release(ReasonCompleted)
}

// A renewal Redis refuses leaves the edge's leases with their requests
// (nothing is cut: the nodes' gates still bound the backends), is retried
// as after an outage, and is warned of as a refusal of its kind once a
// minute, not as Redis unavailable; once Redis takes writes again the
// lease is counted in the ledger again.
func TestClusterRefusedRenewalKeepsLeasesAndWarnsOnce(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedCluster(t, rs)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	defer l.Release(ReasonCompleted)
	restore := rs.ReadOnly(t)
	waitFor(t, "three refused renewals", func() bool {
		return logs.FilterMessageSnippet("cluster ledger refused lease renewals").Len() >= 3
	})
	warns := refusedRenewalWarnings(logs)
	if len(warns) != 1 || warns[0].ContextMap()["kind"] != "READONLY" {
		t.Fatalf("refused renewals warned of as %v, want one warning of kind READONLY", warns)
	}
	if all, _ := renewalFailures(logs); all != 0 {
		t.Fatalf("refused renewals logged as Redis not answering (%d lines)", all)
	}
	f.d.mu.Lock()
	released := l.released
	f.d.mu.Unlock()
	if released {
		t.Fatal("a refused renewal released the lease")
	}
	restore()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	key := cluster.Key("n", "p")
	waitFor(t, "the lease renewed once Redis takes writes again", func() bool {
		s, err := rdb.ZScore(context.Background(), key, l.ledgerID).Result()
		return err == nil && time.UnixMilli(int64(s)).After(time.Now().Add(2*time.Second))
	})
}
