package dispatch

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Providers whose names would spell the same ledger key (a provider
// named "p:long" beside "p", whose long leases are counted under
// <key of p>:long) count their leases apart: a long lease on p does not
// fill p:long, nor one on p:long p's long slot.
func TestClusterProvidersWithLookalikeNamesCountApart(t *testing.T) {
	rs := testredis.Start(t)
	cfg := buildCfg(t, []tNode{{id: "n", provs: []tProv{{name: "p", cap: 1, long: 1}, {name: "p:long", cap: 1, long: 1}}}},
		[]tModel{
			{name: "m", long: 100, cands: []string{"n/p"}},
			{name: "m2", long: 100, cands: []string{"n/p:long"}},
		})
	f := newClusterFixture(t, cfg, rs)
	f.up("n")
	onP := mustAcquire(t, f.d, Request{Model: "m", PromptTokens: 200})
	defer onP.Release(ReasonCompleted)
	l, err := f.d.Acquire(context.Background(), Request{Model: "m2", NoWait: true})
	if err != nil {
		t.Fatalf("p:long, idle, while p holds a long lease: %v", err)
	}
	l.Release(ReasonCompleted)
}
