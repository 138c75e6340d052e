package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// deadlineTimeout is the ledger timeout of the deadline tests, and
// deadlinePause how long each round trip of a call of one round trip is
// held: one round trip is left 450 ms for the hook's CLIENT PAUSE, the
// command's own round trip and the scheduler (with 400 ms of 600 ms, 200
// ms left, one took 562 ms at load 16 under -race, 38 ms short of a false
// failure).
//
// twoTripPause holds each round trip of a call of two: the second reply
// comes 1500 ms or more after the call began (each pause starts before
// its command is sent), 500 ms past the one deadline, so that a timer the
// runtime fires late on a loaded machine still cuts the read before the
// reply arrives. With 550 ms (the reply 100 ms past the deadline) a held
// Status was answered after 1.26 s at load 29. Each round trip still
// ends within its own timeout, 250 ms to spare: code that gave each
// round trip a deadline of its own (the old client's fresh read timeout)
// answers the call after 1500 ms without an error, which the tests
// refuse whatever the time.
const (
	deadlineTimeout = 1000 * time.Millisecond
	deadlinePause   = 550 * time.Millisecond
	twoTripPause    = 750 * time.Millisecond
	// hungAfter bounds a call the deadline should have cut, five times
	// the timeout: what tells one deadline from one per round trip is the
	// error (the call's round trips are held so that its last reply comes
	// 500 ms or more past the deadline), and the time only catches a call
	// that hung (retried, or waited out a longer pause). A bound of the
	// timeout and a slack (300 ms) failed when the runtime fired the
	// deadline's timer late on a loaded 2-core machine (1.26 s seen at
	// load 29).
	hungAfter = 5 * deadlineTimeout
)

// pausedLedger is a ledger of edge "e" with the timeout of the deadline
// tests on rs, its round trips paused by the returned pauser (off until
// its ms is set).
func pausedLedger(t *testing.T, rs *testredis.Server) (*Ledger, *clustertest.Pauser) {
	t.Helper()
	return pausedLedgerOf(t, rs, Config{Address: rs.Addr, TTL: time.Minute, Timeout: deadlineTimeout, EdgeID: "e"})
}

// pausedLedgerOf is pausedLedger with the ledger of cfg.
func pausedLedgerOf(t *testing.T, rs *testredis.Server, cfg Config) (*Ledger, *clustertest.Pauser) {
	t.Helper()
	l := Open(cfg)
	t.Cleanup(func() { _ = l.Close() })
	p := clustertest.NewPauser(t, rs.Client(t))
	l.Client().AddHook(p)
	return l, p
}

// pausedWithLease is pausedLedger on a Redis of its own, with a plain
// client of it, the key of resource n/p and a lease the ledger holds on
// it.
func pausedWithLease(t *testing.T) (rdb *redis.Client, l *Ledger, p *clustertest.Pauser, key, held string) {
	t.Helper()
	rs := testredis.Start(t)
	l, p = pausedLedger(t, rs)
	key = Key("n", "p")
	return rs.Client(t), l, p, key, takeN(t, l, key, 1)[0]
}

// unpaused waits until the server answers a plain client again (the last
// pause has ended), so that checks after a paused call are not cut by it.
func unpaused(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// Every call of the ledger keeps to one deadline, cfg.Timeout after it
// began, across all its round trips: a call of two round trips on a Redis
// that takes 750 ms to answer each fails as unanswered at the 1000 ms
// timeout (code that gave each round trip its own deadline answered after
// about 1500 ms, twice the NOSCRIPT resend's share), while a call of one
// round trip, held 550 ms, still succeeds. After each, the same ledger's
// next calls read their own replies: the connection the deadline cut was
// dropped, not reused with the late reply still on its way.
func TestEveryLedgerCallKeepsToOneDeadline(t *testing.T) {
	rdb, l, p, key, held := pausedWithLease(t)
	ctx := context.Background()
	if err := l.SetPending(ctx, map[string]int{"m": 1}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// trips is how many round trips the call makes with the
		// script cache flushed and the connections warm.
		trips int
		call  func() error
	}{
		{"take (EVALSHA, NOSCRIPT, EVAL)", 2, func() error {
			_, err := l.Take(ctx, key, 100, 100, false, l.NewLeaseID(), WaitKey("m", 0), "", 0, 0)
			return err
		}},
		{"renew and its resend", 2, func() error {
			_, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: held}}})
			return err
		}},
		{"wait and its resend", 2, func() error {
			return l.Apply(ctx, []Update{{Kind: OpWait, Key: WaitKey("m", 0), ID: l.NewWaiterID(0)}})
		}},
		{"return and its resend", 2, func() error {
			return l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: "e/not-held", Fence: true}})
		}},
		{"held and its resend", 2, func() error {
			_, err := l.Held(ctx, []string{key})
			return err
		}},
		{"pending and its resend", 2, func() error {
			_, err := l.Pending(ctx)
			return err
		}},
		{"publish pending and its resend", 2, func() error { return l.SetPending(ctx, map[string]int{"m": 1}) }},
		{"tick (renew, alive, pending) and its resend", 2, func() error {
			r := l.Tick(ctx, map[string][]HeldLease{key: {{ID: held}}}, map[string]int{"m": 1})
			return errors.Join(r.Renew, r.Alive, r.Pending)
		}},
		{"alive", 1, func() error { return l.Alive(ctx) }},
		{"ping", 1, func() error { return l.Ping(ctx) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Warm both pools (commands, pipelines) unpaused: the call
			// under test makes only its own round trips.
			if err := l.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Apply(ctx, []Update{{Kind: OpUnwait, Key: WaitKey("m", 0), ID: "e/none"}}); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			pause := deadlinePause
			if c.trips > 1 {
				pause = twoTripPause
			}
			p.MS.Store(pause.Milliseconds())
			start := time.Now()
			err := c.call()
			took := time.Since(start)
			p.MS.Store(0)
			unpaused(t, rdb)
			if c.trips > 1 {
				if !errors.Is(err, ErrUnavailable) || took >= hungAfter {
					t.Fatalf("%d round trips of %v each: %v after %v; want %v within %v", c.trips, pause, err, took, ErrUnavailable, hungAfter)
				}
			} else if err != nil {
				t.Fatalf("one round trip of %v within the %v timeout: %v after %v", pause, deadlineTimeout, err, took)
			}
			checkReplies(t, l, rdb, key)
		})
	}
}

// A fresh connection's dial and handshake (HELLO) count in the call's
// deadline: a Ping on a new ledger, its handshake's round trip and its
// own taking 750 ms each, fails at the timeout (the old client, whose
// handshake read with the per-read timeout only, answered after four of
// them: HELLO, CLIENT MAINT_NOTIFICATIONS, CLIENT SETINFO, PING; with
// the handshake of one round trip, code that gave each round trip its
// own deadline answers after 1500 ms without an error).
func TestAFreshConnectionsHandshakeKeepsToTheCallsDeadline(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	l, p := pausedLedger(t, rs)
	pingFailsAtTheDeadline(t, l, p, rdb, twoTripPause)
	checkReplies(t, l, rdb, Key("n", "p"))
}

// pingFailsAtTheDeadline checks that a Ping on l, each of its round trips
// held for pause by p, fails as unanswered (not after hungAfter), and
// waits until the pause has ended. The pause must bring its last reply
// 500 ms or more past the deadline, so that a timer fired late on a
// loaded machine still cuts the read before it.
func pingFailsAtTheDeadline(t *testing.T, l *Ledger, p *clustertest.Pauser, rdb *redis.Client, pause time.Duration) {
	t.Helper()
	p.MS.Store(pause.Milliseconds())
	start := time.Now()
	err := l.Ping(context.Background())
	took := time.Since(start)
	p.MS.Store(0)
	unpaused(t, rdb)
	if !errors.Is(err, ErrUnavailable) || took >= hungAfter {
		t.Fatalf("ping on a new connection, each round trip %v: %v after %v; want %v within %v", pause, err, took, ErrUnavailable, hungAfter)
	}
}

// checkReplies checks, unpaused, that l's calls read their own replies:
// its count of key is the server's, a take is granted and counted, and
// its return frees the slot.
func checkReplies(t *testing.T, l *Ledger, rdb *redis.Client, key string) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		want, err := rdb.ZCard(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Held(ctx, []string{key})
		if err != nil || got[key] != int(want) {
			t.Fatalf("held after the deadline: %v %v, want %d", got, err, want)
		}
		id := l.NewLeaseID()
		if out, err := l.Take(ctx, key, int(want)+1, int(want)+1, false, id, "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("take after the deadline: %v %v", out, err)
		}
		if !inSet(t, rdb, key, id) {
			t.Fatalf("lease %s taken but not in Redis", id)
		}
		if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil || inSet(t, rdb, key, id) {
			t.Fatalf("return after the deadline: %v (still held: %v)", err, inSet(t, rdb, key, id))
		}
		if err := l.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A new connection's handshake is HELLO alone (no CLIENT SETINFO, no
// CLIENT MAINT_NOTIFICATIONS): a Ping on a new ledger makes two round
// trips, and with each taking a quarter of the timeout it succeeds within
// it (half of it left for the pauses' own round trips and the
// scheduler). With the client's default handshake it made four (three
// once the server had refused maintenance notifications), which the
// count of round trips tells whatever the machine's load.
func TestAFreshConnectionsHandshakeIsOneRoundTrip(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	l, p := pausedLedger(t, rs)
	pingTakesRoundTrips(t, l, p, rdb, deadlineTimeout/4, "HELLO, PING")
}

// pingTakesRoundTrips checks that a Ping on l, each of its round trips
// held for pause by p, succeeds after the round trips named in trips
// (comma-separated), and that l's calls read their own replies after it.
func pingTakesRoundTrips(t *testing.T, l *Ledger, p *clustertest.Pauser, rdb *redis.Client, pause time.Duration, trips string) {
	t.Helper()
	p.MS.Store(pause.Milliseconds())
	err := l.Ping(context.Background())
	p.MS.Store(0)
	unpaused(t, rdb)
	want := int64(strings.Count(trips, ",") + 1)
	if n := p.Trips.Load(); err != nil || n != want {
		t.Fatalf("ping on a new connection, each round trip %v: %v after %d round trips; want success after %d (%s)", pause, err, n, want, trips)
	}
	checkReplies(t, l, rdb, Key("n", "p"))
}
