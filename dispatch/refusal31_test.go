package dispatch

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// refuseTakes makes requests for model m on f until Redis has refused n
// of their takes (the others fail at once, backing off): each must be
// refused as unavailable.
func refuseTakes(t *testing.T, f *fixture, n int) {
	t.Helper()
	refused := 0
	waitFor(t, strconv.Itoa(n)+" takes Redis refused", func() bool {
		_, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true})
		if !errors.Is(err, ErrClusterUnavailable) {
			t.Fatalf("acquire on a Redis that refuses writes: %v, want %v", err, ErrClusterUnavailable)
		}
		if errors.Is(err, cluster.ErrRefused) {
			refused++
		}
		return refused == n
	})
}

// A refused grant held back after its kind's warning is warned of by the
// cluster loop's periodic flush once its interval has passed, not only at
// Close (the interval shortened from a minute through the ledger's test
// setter).
func TestClusterHeldBackRefusalIsWarnedOfByThePeriodicFlush(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedCluster(t, rs)
	// Held back however slow the machine: the interval is shortened
	// only once the second refusal is in.
	f.d.ledger.SetRefusalLogEvery(time.Hour)
	rs.ReadOnly(t)
	refuseTakes(t, f, 2)
	if warns := refusedGrantWarnings(logs); len(warns) != 1 {
		t.Fatalf("%d warnings of refused grants right after two, want 1 (the second held back): %v", len(warns), warns)
	}
	f.d.ledger.SetRefusalLogEvery(time.Millisecond)
	waitFor(t, "the held-back refusal's warning, before Close", func() bool { return len(refusedGrantWarnings(logs)) == 2 })
	if got := refusedGrantWarnings(logs)[1].ContextMap()["batches"]; got != int64(1) {
		t.Fatalf("the periodic flush warned of %v refused grants, want the 1 held back", got)
	}
}

// renewalRecoveries counts the two ways the first renewal accepted after
// failed ones is told.
func renewalRecoveries(logs *observer.ObservedLogs) (answersAgain, acceptsAgain int) {
	info := logs.FilterLevelExact(zapcore.InfoLevel)
	return info.FilterMessage("cluster lease renewal answers again").Len(),
		info.FilterMessage("cluster ledger accepts lease renewals again").Len()
}

// The first renewal accepted after refused ones says Redis accepts them
// again, not that it answers again (it never stopped answering); after an
// outage it says Redis answers again. The old code said "answers again"
// after both.
func TestClusterRenewalRecoveryIsToldAsWhatEnded(t *testing.T) {
	t.Run("refusals", func(t *testing.T) {
		rs := testredis.Start(t)
		_, logs := observedCluster(t, rs)
		restore := rs.ReadOnly(t)
		waitFor(t, "a refused renewal", func() bool { return len(refusedRenewalWarnings(logs)) > 0 })
		restore()
		waitFor(t, "the renewal accepted again", func() bool { _, accepts := renewalRecoveries(logs); return accepts == 1 })
		if answers, _ := renewalRecoveries(logs); answers != 0 {
			t.Fatalf("%d renewals after refusals told as Redis answering again", answers)
		}
	})
	t.Run("outage", func(t *testing.T) {
		rs := testredis.Start(t)
		_, logs := observedCluster(t, rs)
		rs.Stop()
		waitFor(t, "a failed renewal", func() bool { _, warned := renewalFailures(logs); return warned > 0 })
		rs.Restart()
		waitFor(t, "the renewal answered again", func() bool { answers, _ := renewalRecoveries(logs); return answers == 1 })
		if _, accepts := renewalRecoveries(logs); accepts != 0 {
			t.Fatalf("%d renewals after an outage told as accepted again after refusals", accepts)
		}
	})
}

// A take Redis refused queues its return (a script refused part-way may
// have written), which removes nothing: it announces nothing either, so
// it wakes no edge. The old code announced every return, and each refused
// take woke every edge. A lease's real return is still announced.
func TestClusterRefusedTakesReturnWakesNoOne(t *testing.T) {
	f, rs := oneSlotCluster(t)
	ctx := context.Background()
	rdb := rs.Client(t)
	sub := rdb.Subscribe(ctx, cluster.FreedChannel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	restore := rs.OutOfMemory(t)
	if _, err := f.d.Acquire(ctx, Request{Model: "m", NoWait: true}); !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("acquire on a Redis out of memory: %v, want a refusal", err)
	}
	restore()
	var l *Lease
	waitFor(t, "a grant once the backoff has passed", func() bool {
		var err error
		l, err = f.d.Acquire(ctx, Request{Model: "m", NoWait: true})
		if err != nil && !errors.Is(err, ErrClusterUnavailable) {
			t.Fatalf("acquire: %v", err)
		}
		return err == nil
	})
	l.Release(ReasonCompleted)
	// The returner sends in order: once the lease is gone, the refused
	// take's return ran before it.
	key := cluster.Key("n", "p")
	waitFor(t, "the lease's return", func() bool { return rdb.ZCard(ctx, key).Val() == 0 })
	if err := rdb.Publish(ctx, cluster.FreedChannel, "sentinel").Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	deadline := time.After(waitDeadline)
	for done := false; !done; {
		select {
		case m := <-sub.Channel():
			if done = m.Payload == "sentinel"; !done {
				got = append(got, m.Payload)
			}
		case <-deadline:
			t.Fatalf("the sentinel never came (announcements so far: %q)", got)
		}
	}
	if len(got) != 1 || got[0] != key {
		t.Fatalf("announced %q, want only the lease's return on %s", got, key)
	}
}
