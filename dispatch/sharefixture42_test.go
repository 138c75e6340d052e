package dispatch

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// shareEdge is the setup of the Responses id sharing tests: it starts a
// redis-server rs and a client rdb of it, and edge e1 sharing its ledger
// (clusterEdge: twoProviderCfg, node a ready), and takes a lease l of
// model only-p2 (provider p2) for the test to remember ids with.
//
// timeout is the ledger's Config.Timeout: the bound of each Redis call
// the edge makes, so of a batch of writes Redis holds, of AwaitShared on
// it and of a lookup. Tests state it where what they assert depends on it.
//
// The cleanups run in this order: l released, the edge closed, rdb
// closed, rs stopped. A test may release l itself at the moment it needs
// (only a lease's first Release counts; the cleanup's then does nothing).
func shareEdge(t *testing.T, timeout time.Duration) (rs *testredis.Server, rdb *redis.Client, e *fixture, l *Lease) {
	t.Helper()
	rs = testredis.Start(t)
	rdb = rs.Client(t)
	e = clusterEdge(t, rs, "e1", timeout)
	l = mustAcquire(t, e.d, Request{Model: "only-p2"})
	t.Cleanup(func() { l.Release(ReasonCompleted) })
	return rs, rdb, e, l
}
