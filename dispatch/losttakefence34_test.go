package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// The return of a take that got no answer is fenced: the take may still
// reach Redis after it (see returnLostTakeLocked), and the mark the fence
// leaves makes that take add nothing (take.lua). A request's take on a
// Redis paused past the timeout fails unanswered; once Redis answers
// again the lost take's return is applied with its mark, which lives no
// longer than the TTL. Before, the return was plain and left no mark: a
// take run after it held the slot, for nobody, for the TTL.
func TestALostTakesReturnIsFenced(t *testing.T) {
	rs := testredis.Start(t)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: rs.Addr, TTL: 3 * time.Second, Timeout: 300 * time.Millisecond, EdgeID: "e1"}, Options{})
	f.up("n")
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	ctx := context.Background()
	pauseRedis(t, rs, 1500)
	ctx2, cancel := context.WithTimeout(ctx, waitDeadline)
	defer cancel()
	if _, err := f.d.Acquire(ctx2, Request{Model: "m"}); !errors.Is(err, ErrClusterUnavailable) {
		t.Fatalf("acquire on a paused Redis: %v, want %v", err, ErrClusterUnavailable)
	}
	var marks []string
	waitFor(t, "the lost take's return applied with its mark", func() bool {
		marks, _ = rdb.Keys(ctx, "iop:returned:e1/*").Result()
		return len(marks) > 0
	})
	if ttl := rdb.PTTL(ctx, marks[0]).Val(); ttl <= 0 || ttl > 3*time.Second {
		t.Fatalf("mark %s expires in %v, want within the 3 s TTL", marks[0], ttl)
	}
	if n := rdb.ZCard(ctx, cluster.Key("n", "p")).Val(); n != 0 {
		t.Fatalf("%d leases after the lost take's return, want none", n)
	}
}

// evalFailures is how many scripts Redis has run (EVAL and EVALSHA) and
// how many of them failed with an error reply.
func evalFailures(t *testing.T, rdb *redis.Client) (calls, failed int64) {
	t.Helper()
	for _, prefix := range []string{"cmdstat_eval:", "cmdstat_evalsha:"} {
		calls += max(clustertest.InfoField(t, rdb, "commandstats", prefix, "calls"), 0)
		failed += max(clustertest.InfoField(t, rdb, "commandstats", prefix, "failed_calls"), 0)
	}
	return calls, failed
}

// A take Redis refused was answered: nothing of it is on its way, and its
// return is plain, so that a Redis out of memory, which refuses a fence's
// mark (and with it the whole fenced return), takes it: the take's
// refusal is the one failed script, the return after it runs and fails
// not. Fenced, the return was refused as well, kept and sent again for
// as long as Redis stayed full.
func TestARefusedTakesReturnIsPlain(t *testing.T) {
	rs := testredis.Start(t)
	// A TTL of a minute: no renewal tick runs a script meanwhile, once
	// the loop's first has been answered.
	preloadTick(t, rs.Addr)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	awaitFirstTick(t, rdb)
	// A take and its return load their scripts: the ones below run by
	// their hash at once (a NOSCRIPT counts as a failed call).
	mustAcquire(t, f.d, Request{Model: "m"}).Release(ReasonCompleted)
	ctx := context.Background()
	waitFor(t, "the lease returned", func() bool { return rdb.ZCard(ctx, cluster.Key("n", "p")).Val() == 0 })
	calls, failed := evalFailures(t, rdb)
	rs.OutOfMemory(t)
	refuseTakes(t, f, 1)
	waitFor(t, "the refused take's return run", func() bool { n, _ := evalFailures(t, rdb); return n >= calls+2 })
	if _, bad := evalFailures(t, rdb); bad != failed+1 {
		t.Fatalf("%d scripts failed after a refused take and its return; want 1 (the take)", bad-failed)
	}
}
