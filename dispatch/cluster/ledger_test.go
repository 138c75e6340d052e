package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

func ledger(t *testing.T, addr, edge string, ttl time.Duration) *Ledger {
	t.Helper()
	l := Open(Config{Address: addr, TTL: ttl, Timeout: time.Second, EdgeID: edge})
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// ledgerOnRedis starts a Redis with a ledger of edge "e" (leases of a
// minute) and a plain client to look at or tamper with its keys.
func ledgerOnRedis(t *testing.T) (*testredis.Server, *Ledger, *redis.Client) {
	t.Helper()
	rs := testredis.Start(t)
	return rs, ledger(t, rs.Addr, "e", time.Minute), rs.Client(t)
}

// Three edges taking and returning leases on one resource concurrently
// never hold more than its capacity (nor more long leases than the long
// capacity), and every slot comes back.
func TestTakeNeverExceedsCapacity(t *testing.T) {
	rs := testredis.Start(t)
	const capacity, longCap = 4, 1
	key := Key("n", "p")
	var held, long, maxHeld, maxLong atomic.Int64
	var wg sync.WaitGroup
	for e := range 3 {
		l := ledger(t, rs.Addr, fmt.Sprintf("edge%d", e), 30*time.Second)
		for w := range 4 {
			wg.Add(1)
			// Owner: the test. Stops after its iterations.
			go func() {
				defer wg.Done()
				for i := range 40 {
					isLong := (w+i)%5 == 0
					id := l.NewLeaseID()
					out, err := l.Take(context.Background(), key, capacity, longCap, isLong, id, "", "", 0, 0)
					if err != nil {
						t.Error(err)
						return
					}
					if out != Taken {
						continue
					}
					h := held.Add(1)
					for m := maxHeld.Load(); h > m && !maxHeld.CompareAndSwap(m, h); m = maxHeld.Load() {
					}
					time.Sleep(time.Millisecond) // hold it a moment: leases overlap
					if isLong {
						lh := long.Add(1)
						for m := maxLong.Load(); lh > m && !maxLong.CompareAndSwap(m, lh); m = maxLong.Load() {
						}
						long.Add(-1)
					}
					held.Add(-1) // counted down before the return: never over-counted
					if err := l.Apply(context.Background(), []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if maxHeld.Load() > capacity || maxLong.Load() > longCap {
		t.Fatalf("held at most %d (long %d), capacity %d (long %d)", maxHeld.Load(), maxLong.Load(), capacity, longCap)
	}
	if maxHeld.Load() < 2 {
		t.Fatalf("the test never held two leases at once (max %d)", maxHeld.Load())
	}
	n, err := ledger(t, rs.Addr, "check", time.Second).Held(context.Background(), []string{key})
	if err != nil || n[key] != 0 {
		t.Fatalf("left held: %v %v", n, err)
	}
}

// A lease whose edge stops renewing frees its slot after the TTL; one
// that is renewed does not; and Redis gone is ErrUnavailable.
func TestLeaseExpiryRenewalAndUnavailable(t *testing.T) {
	rs := testredis.Start(t)
	key := Key("n", "p")
	const ttl = time.Second // see renewThrough
	a, b := ledger(t, rs.Addr, "a", ttl), ledger(t, rs.Addr, "b", ttl)
	ctx := context.Background()
	crashed, kept := a.NewLeaseID(), b.NewLeaseID()
	var keptFrom time.Time // when kept's take began (renewThrough)
	for _, tk := range []struct {
		l  *Ledger
		id string
	}{{a, crashed}, {b, kept}} {
		keptFrom = time.Now()
		if out, err := tk.l.Take(ctx, key, 2, 2, false, tk.id, "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("take: %v %v", out, err)
		}
	}
	if out, _ := b.Take(ctx, key, 2, 2, false, b.NewLeaseID(), "", "", 0, 0); out == Taken {
		t.Fatal("a third lease on capacity 2")
	}
	// b renews its lease through two TTLs; a's (crashed) is never renewed.
	renewThrough(t, b, key, HeldLease{ID: kept}, ttl, keptFrom)
	held, err := b.Held(ctx, []string{key})
	if err != nil || held[key] != 1 {
		t.Fatalf("after the TTL held %v, want only the renewed lease (%v)", held, err)
	}
	if out, err := b.Take(ctx, key, 2, 2, false, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("the crashed edge's slot did not come back: %v %v", out, err)
	}
	rs.Stop()
	if _, err := b.Take(ctx, key, 2, 2, false, b.NewLeaseID(), "", "", 0, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("redis down: err = %v", err)
	}
	rs.Restart()
	if out, err := b.Take(ctx, key, 2, 2, false, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("after redis came back: %v %v", out, err)
	}
}

// Fairness: a request yields a free slot to an older waiter of another
// live edge, not to one of its own edge, not to one of an edge that is
// gone, and not to one that has waited longer than MaxYield.
func TestTakeYieldsToOlderWaiterOfAnotherEdge(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	a, b := fairnessPair(t, rs)
	old := a.NewWaiterID(0)
	if err := a.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: old}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(FairSlack + 50*time.Millisecond)
	if out, err := b.Take(ctx, key, 1, 1, false, b.NewLeaseID(), wait, "", 0, 0); out != Yield || err != nil {
		t.Fatalf("a younger request of another edge: %v %v, want Yield", out, err)
	}
	id := a.NewLeaseID()
	if out, err := a.Take(ctx, key, 1, 1, false, id, wait, old, 0, 0); out != Taken || err != nil {
		t.Fatalf("the old waiter itself: %v %v, want Taken", out, err)
	}
	if err := a.Apply(ctx, []Update{{Kind: OpUnwait, Key: wait, ID: old}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil {
		t.Fatal(err)
	}
	if out, _ := b.Take(ctx, key, 1, 1, false, b.NewLeaseID(), wait, "", 0, 0); out != Taken {
		t.Fatalf("once the old waiter is served: %v, want Taken", out)
	}

	// A waiter of an edge that is not alive is dropped, not yielded to.
	key2 := Key("n", "q")
	ghost := "edge-gone/w1"
	if err := a.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: ghost}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(FairSlack + 50*time.Millisecond)
	if out, _ := b.Take(ctx, key2, 1, 1, false, b.NewLeaseID(), wait, "", 0, 0); out != Taken {
		t.Fatalf("behind a gone edge's waiter: %v, want Taken", out)
	}
}

// Apply makes its updates in order in one round trip: a waiter registered
// and removed in one batch is gone, leases returned in it are free, and
// each key with returns is announced once, after them.
func TestApplyInOrderAnnouncesEachKeyOnce(t *testing.T) {
	rs := testredis.Start(t)
	l := ledger(t, rs.Addr, "e", 30*time.Second)
	ctx := context.Background()
	a, b := Key("n", "a"), Key("n", "b")
	var ids []string
	for _, key := range []string{a, a, b} {
		id := l.NewLeaseID()
		if out, err := l.Take(ctx, key, 4, 4, true, id, "", "", 0, 0); err != nil || out != Taken {
			t.Fatalf("take: %v %v", out, err)
		}
		ids = append(ids, id)
	}
	sub := l.Client().Subscribe(ctx, FreedChannel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	wait := WaitKey("m", 0)
	err := l.Apply(ctx, []Update{
		{Kind: OpWait, Key: wait, ID: "e/w1"},
		{Kind: OpReturn, Key: a, ID: ids[0]},
		{Kind: OpReturn, Key: a, ID: ids[1]},
		{Kind: OpUnwait, Key: wait, ID: "e/w1"},
		{Kind: OpReturn, Key: b, ID: ids[2]},
	})
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.Held(ctx, []string{a, a + ":long", b, b + ":long"})
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range held {
		if n != 0 {
			t.Errorf("%s holds %d leases after their return", k, n)
		}
	}
	if n, err := l.Client().ZCard(ctx, wait).Result(); err != nil || n != 0 {
		t.Errorf("wait set holds %d (%v) after the waiter's removal", n, err)
	}
	got := map[string]int{}
	ch := sub.Channel()
	for len(got) < 2 {
		select {
		case m := <-ch:
			got[m.Payload]++
		case <-time.After(5 * time.Second):
			t.Fatalf("announcements %v, want one for each key", got)
		}
	}
	select {
	case m := <-ch:
		got[m.Payload]++
	case <-time.After(200 * time.Millisecond):
	}
	if got[a] != 1 || got[b] != 1 {
		t.Errorf("announcements %v, want one each for %s and %s", got, a, b)
	}
}
