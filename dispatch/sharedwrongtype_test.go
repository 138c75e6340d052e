package dispatch

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A ledger key of one provider holding another program's value (Redis
// answers WRONGTYPE) costs only that provider: a request goes to the
// model's next candidate, and requests for other providers are not
// refused as if Redis were down.
func TestClusterKeyOfAnotherTypeCostsOnlyItsProvider(t *testing.T) {
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 2}}}, {id: "n2", provs: []tProv{{name: "p", cap: 2}}}},
		[]tModel{{name: "m", timeout: 30, cands: []string{"n/p", "n2/p"}}, {name: "other", timeout: 30, cands: []string{"n2/p"}}})
	f := newClusterFixture(t, cfg, rs)
	f.up("n")
	f.up("n2")
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), cluster.Key("n", "p"), "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, f.d, Request{Model: "m", NoWait: true})
	if l.NodeID != "n2" {
		t.Fatalf("leased %s/%s, want n2/p", l.NodeID, l.ProviderID)
	}
	mustAcquire(t, f.d, Request{Model: "other", NoWait: true}).Release(ReasonCompleted)
	l.Release(ReasonCompleted)
}
