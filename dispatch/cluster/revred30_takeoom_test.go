package cluster

import (
	"context"
	"errors"
	"testing"
)

// A take on a Redis out of memory (maxmemory, noeviction) is refused
// before it writes anything, as its renewal would be: a lease granted
// then could not be renewed (renew.lua's first write, ZADD, is refused),
// so the other edges would stop counting it a TTL later while its work
// runs on, and takes would go past the capacity. Refused, the request
// gets cluster_unavailable until Redis has memory again. Redis refuses a
// script's write for memory only while the script has written nothing:
// take.lua's first writes (ZREMRANGEBYSCORE, never refused for memory)
// used to let its ZADD through.
func TestTakeOutOfMemoryIsRefusedBeforeAnyWrite(t *testing.T) {
	rs, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	// A waiter of this edge in the wait set, so that the fairness
	// check's writes (ZREMRANGEBYSCORE on the wait set) run too.
	if err := l.Apply(ctx, []Update{{Kind: OpWait, Key: WaitKey("m", 0), ID: l.NewWaiterID(0)}}); err != nil {
		t.Fatal(err)
	}
	restore := rs.OutOfMemory(t)
	for _, wait := range []string{"", WaitKey("m", 0)} {
		for _, long := range []bool{false, true} {
			out, err := l.Take(ctx, key, 4, 4, long, l.NewLeaseID(), wait, "", 0, 0)
			if out == Taken || !errors.Is(err, ErrRefused) || ReplyKind(err) != "OOM" {
				t.Errorf("take (wait set %q, long %v) out of memory: %v, %v (kind %q); want %v of kind OOM", wait, long, out, err, ReplyKind(err), ErrRefused)
			}
		}
	}
	restore()
	for _, k := range []string{key, key + ":long"} {
		if n, err := rdb.ZCard(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("%s holds %d leases after takes refused for memory (%v); want 0", k, n, err)
		}
	}
	if out, err := l.Take(ctx, key, 4, 4, true, l.NewLeaseID(), WaitKey("m", 0), "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take once Redis has memory again: %v %v", out, err)
	}
}
