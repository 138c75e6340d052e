package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A queued waiter's take that Redis refuses (out of memory) is warned of
// as a refused grant, as a fresh request's is, and the waiter keeps its
// place: it is served once Redis has memory again.
func TestClusterRefusedHandOnIsWarnedOfAndRetried(t *testing.T) {
	rs := testredis.Start(t)
	f, logs := observedCluster(t, rs)
	key := cluster.Key("n", "p")
	rdb := otherEdgeHolds(t, rs, key, "other/1") // the only slot: the request queues
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	ctx := context.Background()
	restore := rs.OutOfMemory(t)
	// The other edge's lease ends, unannounced (a removal is allowed out
	// of memory): the retry tick hands the slot to the waiter, whose take
	// Redis refuses.
	if err := rdb.ZRem(ctx, key, "other/1").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused hand-on warned of", func() bool { return len(refusedGrantWarnings(logs)) == 1 })
	if kind := refusedGrantWarnings(logs)[0].ContextMap()["kind"]; kind != "OOM" {
		t.Fatalf("refused grant of kind %v, want OOM", kind)
	}
	restore()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		r.l.Release(ReasonCompleted)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not served once Redis had memory again")
	}
}
