package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// dbLedger is a ledger of edge "e" on database 1 of rs, with the timeout
// of the deadline tests and its round trips paused by the returned pauser
// (off until its ms is set), and a plain client of that database.
func dbLedger(t *testing.T, rs *testredis.Server) (*Ledger, *clustertest.Pauser, *redis.Client) {
	t.Helper()
	l, p := pausedLedgerOf(t, rs, Config{Address: rs.Addr, DB: 1, TTL: time.Minute, Timeout: deadlineTimeout, EdgeID: "e"})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, DB: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return l, p, rdb
}

// With a database other than 0 a fresh connection's handshake is two
// round trips (HELLO, then SELECT), and both count in the deadline of the
// call that needs the connection: a Ping on a new ledger on database 1,
// each round trip held 550 ms, fails as unanswered at the 1000 ms
// timeout instead of answering after three of them (1650 ms or more).
// Afterwards the ledger's calls read their own replies, on database 1.
func TestAFreshConnectionsSelectKeepsToTheCallsDeadline(t *testing.T) {
	rs := testredis.Start(t)
	l, p, rdb := dbLedger(t, rs)
	pingFailsAtTheDeadline(t, l, p, rdb, deadlinePause)
	checkReplies(t, l, rdb, Key("n", "p"))
	if n := rs.Client(t).Exists(context.Background(), Key("n", "p")).Val(); n != 0 {
		t.Fatal("the ledger of database 1 wrote to database 0")
	}
}

// The handshake on database 1 is HELLO and SELECT, nothing more: a Ping
// on a new ledger makes three round trips, and with each taking a fifth
// of the timeout it succeeds within it.
func TestAFreshConnectionsHandshakeOnADatabaseIsTwoRoundTrips(t *testing.T) {
	rs := testredis.Start(t)
	l, p, rdb := dbLedger(t, rs)
	pingTakesRoundTrips(t, l, p, rdb, deadlineTimeout/5, "HELLO, SELECT, PING")
}
