package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A queued grant whose ledger take is in flight when the dispatcher closes
// gives its slot back: the take went on to succeed in Redis while Close
// failed the waiter, and the return it then queued could come after the
// returner's last batch, leaving the slot taken for every edge for the
// lease TTL (a minute here). Each round is one such take racing the
// returner's last batch; the old code lost the return in about one round
// of six.
func TestClusterHandOnInFlightAtCloseReturnsItsSlot(t *testing.T) {
	onlyAnnouncementsWake(t)
	rs := testredis.Start(t)
	cfg := oneProviderCfg(t, 1)
	key := cluster.Key("n", "p")
	ctx := context.Background()
	for round := range 16 {
		f, led := ledgerFixture(t, cfg, cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * waitDeadline, EdgeID: "e1"}, Options{})
		f.up("n")
		r := f.res("n", "p")
		rdb := otherEdgeHolds(t, rs, key, "other/1")
		ch := f.enqueue(ctx, Request{Model: "m"})
		// The other edge's slot comes back; the waiter's hand-on reaches
		// Redis and waits there, writes being paused.
		if err := rdb.ZRem(ctx, key, "other/1").Err(); err != nil {
			t.Fatal(err)
		}
		pause := pauseWrites(t, rs)
		f.d.wake(func(x *resource) bool { return x == r })
		waitScriptBlocked(t, rdb, "the hand-on's take waiting in Redis")
		closed := make(chan struct{})
		// Owner: the test; Close returns once the hand-on has ended,
		// after the unpause below.
		go func() {
			f.d.Close()
			close(closed)
		}()
		if res := recv(t, ch); !errors.Is(res.err, ErrDispatcherShutdown) {
			t.Fatalf("round %d: the waiter got %v, %v; want ErrDispatcherShutdown", round, res.l, res.err)
		}
		unpause(t, pause)
		select {
		case <-closed:
		case <-time.After(waitDeadline):
			t.Fatal("Close did not return")
		}
		f.wg.Wait()
		_ = led.Close()
		held, err := rdb.ZCard(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if held != 0 {
			t.Fatalf("round %d: after Close the ledger holds %d lease(s) on %s, want 0", round, held, key)
		}
	}
}

// A fresh request whose ledger take is in flight when the dispatcher
// closes is told the dispatcher is shutting down, not that the cluster
// ledger is unavailable (Close cut its round trip short, Redis answered
// nothing wrong), and the slot the take may have taken goes back.
func TestClusterFreshTakeInFlightAtCloseReturnsItsSlot(t *testing.T) {
	rs := testredis.Start(t)
	cfg := oneProviderCfg(t, 1)
	f := patientClusterFixture(t, cfg, rs)
	f.up("n")
	key := cluster.Key("n", "p")
	ctx := context.Background()
	pause := pauseWrites(t, rs)
	ch := f.acquireAsync(ctx, Request{Model: "m"})
	waitScriptBlocked(t, pause, "the take waiting in Redis")
	closed := make(chan struct{})
	// Owner: the test; Close returns once the take has ended, after the
	// unpause below.
	go func() {
		f.d.Close()
		close(closed)
	}()
	waitFor(t, "Close begun", func() bool { return f.d.ctx.Err() != nil })
	unpause(t, pause)
	if res := recv(t, ch); !errors.Is(res.err, ErrDispatcherShutdown) {
		t.Fatalf("the request got %v, %v; want ErrDispatcherShutdown", res.l, res.err)
	}
	select {
	case <-closed:
	case <-time.After(waitDeadline):
		t.Fatal("Close did not return")
	}
	held, err := pause.ZCard(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("after Close the ledger holds %d lease(s) on %s, want 0", held, key)
	}
}

// waitScriptBlocked waits until Redis lists a script call (a ledger take)
// blocked by a write pause (CLIENT PAUSE WRITE), as rdb's CLIENT LIST shows.
func waitScriptBlocked(t *testing.T, rdb *redis.Client, what string) {
	t.Helper()
	waitFor(t, what, func() bool {
		list, err := rdb.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, "flags=b") && strings.Contains(line, "cmd=evalsha") {
				return true
			}
		}
		return false
	})
}
