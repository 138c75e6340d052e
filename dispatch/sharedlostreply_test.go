package dispatch

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// replyDropper is a loopback proxy in front of a redis-server that passes
// every command on and, while drop is set, throws Redis's answers away:
// a command runs, and its caller sees only its timeout (a Redis slower
// than the ledger's timeout, or a connection lost after the command).
type replyDropper struct {
	addr string
	drop atomic.Bool
}

func newReplyDropper(t *testing.T, target string) *replyDropper {
	t.Helper()
	p := &replyDropper{}
	p.addr = replyProxy(t, target, func(n int) int {
		if p.drop.Load() {
			return 0
		}
		return n
	})
	return p
}

// lostReplyCluster is oneSlotCluster with the ledger reaching Redis
// through a replyDropper and a long TTL (so that a slot taken by nobody
// stays taken for the test's length unless returned). The timeout is
// long enough that a command always reaches Redis before its caller gives
// up, even on a loaded machine: the return that follows then never
// overtakes it.
func lostReplyCluster(t *testing.T) (*fixture, *testredis.Server, *replyDropper) {
	t.Helper()
	rs := testredis.Start(t)
	p := newReplyDropper(t, rs.Addr)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1), cluster.Config{Address: p.addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	// One lease taken and returned: the take script is loaded, so the
	// next take is one EVALSHA that runs.
	mustAcquire(t, f.d, Request{Model: "m"}).Release(ReasonCompleted)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	waitFor(t, "the first lease returned", func() bool { return rdb.ZCard(context.Background(), cluster.Key("n", "p")).Val() == 0 })
	return f, rs, p
}

// A fresh request whose take ran in Redis but whose answer never came
// (the ledger's timeout passed first) fails with cluster_unavailable; the
// slot it may have taken goes back to the ledger, rather than staying
// taken by nobody for the lease TTL.
func TestClusterFreshTakeWithLostAnswerGivesSlotBack(t *testing.T) {
	f, rs, p := lostReplyCluster(t)
	key := cluster.Key("n", "p")
	ctx := context.Background()
	rdb, sub := freedSubscriber(t, rs.Addr)

	p.drop.Store(true)
	_, err := f.d.Acquire(ctx, Request{Model: "m", NoWait: true})
	if !errors.Is(err, ErrClusterUnavailable) {
		t.Fatalf("acquire with the answer lost: %v, want %v", err, ErrClusterUnavailable)
	}
	p.drop.Store(false)
	select {
	case m := <-sub.Channel():
		if m.Payload != key {
			t.Fatalf("announced %q, want %q", m.Payload, key)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slot of the take whose answer was lost was never given back")
	}
	if n := rdb.ZCard(ctx, key).Val(); n != 0 {
		t.Fatalf("%d leases left in the ledger after the return, want 0", n)
	}
}

// A waiter's hand-on whose take ran in Redis but whose answer was lost
// gives the slot back: the waiter is served once Redis answers again, not
// after the lease TTL (a minute here).
func TestClusterHandOnWithLostAnswerGivesSlotBack(t *testing.T) {
	f, rs, p := lostReplyCluster(t)
	key := cluster.Key("n", "p")
	rdb := otherEdgeHolds(t, rs, key, "other/1") // the only slot: the request queues
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	p.drop.Store(true)
	// The other edge's lease ends, unannounced: the retry tick hands the
	// slot to the waiter, whose take runs and whose answer is lost.
	if err := rdb.ZRem(context.Background(), key, "other/1").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hand-on take failed", func() bool {
		f.d.mu.Lock()
		defer f.d.mu.Unlock()
		return f.d.resources[resKey{node: "n", provider: "p"}].ledgerRetry
	})
	p.drop.Store(false)
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		r.l.Release(ReasonCompleted)
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiter was not served: the lost take's slot stayed taken (ledger: %v)", rdb.ZRangeWithScores(context.Background(), key, 0, -1).Val())
	}
}

// listenProxy listens on a loopback port and hands each accepted
// connection, with a fresh connection to target, to serve (which must not
// block). A connection whose dial fails is closed. The listener is the
// caller's to close.
func listenProxy(t *testing.T, target string, serve func(c, s net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Owner: the test (cleanup closes the listener). Stops when Accept
	// fails.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			serve(c, s)
		}
	}()
	return ln
}
