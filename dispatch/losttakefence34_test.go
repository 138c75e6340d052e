package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
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
