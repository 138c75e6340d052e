package dispatch

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A long lease the ledger lost from its long set only (the entry there
// expired or was removed) is put back there at the next renewal: until
// then the other edges would grant the provider's long slot again.
func TestClusterLongLeaseLostFromTheLongSetIsPutBack(t *testing.T) {
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 2, long: 1}}}},
		[]tModel{{name: "m", long: 100, timeout: 30, cands: []string{"n/p"}}})
	f := newClusterFixture(t, cfg, rs)
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m", PromptTokens: 200})
	defer l.Release(ReasonCompleted)
	if !l.Long {
		t.Fatal("the lease is not long")
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	long := cluster.Key("n", "p") + ":long"
	if err := rdb.ZRem(context.Background(), long, l.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long lease back in the long set", func() bool { return inLedger(t, rdb, long, l.ledgerID) })
}
