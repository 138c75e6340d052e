package dispatch

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
	"github.com/iop-gateway/iop/nodewire"
)

// Shared mode under churn: requests that queue, give up and hold leases
// for random times, while nodes register again, reloads change a
// capacity and Redis pauses. Throughout, no provider holds more leases
// (reservations of hand-ons in flight included) than its largest
// capacity; every Acquire returns; and once the load stops, the edge and
// the ledger agree that nothing is held or waiting.
func TestClusterChurn(t *testing.T) {
	rs := testredis.Start(t)
	cfgOf := func(capB int) []tNode {
		return []tNode{{id: "A", provs: []tProv{{name: "pa", cap: 2}}}, {id: "B", provs: []tProv{{name: "pb", cap: capB}}}}
	}
	models := []tModel{{name: "m1", timeout: 2, maxQueue: 64, cands: []string{"A/pa", "B/pb"}}, {name: "m2", timeout: 2, maxQueue: 64, cands: []string{"B/pb"}}}
	f := newClusterFixture(t, buildCfg(t, cfgOf(2), models), rs)
	conns := map[string]*nodewire.Conn{"A": f.up("A"), "B": f.up("B")}
	const maxCap = 3

	stop := make(chan struct{})
	var workers sync.WaitGroup
	var served, failed atomic.Int64
	for i := range 12 {
		workers.Add(1)
		// Owner: the test; stops when stop is closed.
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				model := []string{"m1", "m2"}[rng.IntN(2)]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rng.IntN(400))*time.Millisecond)
				done := make(chan struct{})
				var l *Lease
				var err error
				// Owner: this worker; ends with Acquire, which the
				// context bounds.
				go func() { l, err = f.d.Acquire(ctx, Request{Model: model}); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Errorf("Acquire did not return within 10 s")
					cancel()
					return
				}
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				served.Add(1)
				time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
				l.Release(ReasonCompleted)
			}
		}()
	}
	var checks sync.WaitGroup
	checks.Add(1)
	// Owner: the test; stops when stop is closed.
	go func() {
		defer checks.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for _, n := range f.d.Status().Nodes {
				for _, p := range n.Providers {
					if p.InFlight > maxCap || p.InFlight < 0 {
						t.Errorf("%s/%s holds %d leases (capacity at most %d)", n.ID, p.ProviderId, p.InFlight, maxCap)
					}
				}
			}
		}
	}()
	rng := rand.New(rand.NewPCG(99, 2))
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
		switch rng.IntN(4) {
		case 0: // a node's session ends and it registers again
			id := []string{"A", "B"}[rng.IntN(2)]
			f.d.Closed(conns[id], nil)
			conns[id] = f.up(id)
		case 1: // a reload changes B's capacity
			f.d.Reload(buildCfg(t, cfgOf(1+rng.IntN(maxCap)), models))
		case 2: // Redis stalls
			if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "150", "ALL").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	workers.Wait()
	checks.Wait()
	t.Logf("%d leases served, %d acquires failed (timeouts, gone nodes)", served.Load(), failed.Load())
	if served.Load() < 100 {
		t.Errorf("only %d leases served under churn", served.Load())
	}
	keys := []string{cluster.Key("A", "pa"), cluster.Key("B", "pb")}
	waits := []string{cluster.WaitKey("m1", 0), cluster.WaitKey("m2", 0)}
	waitFor(t, "the edge and the ledger quiet", func() bool {
		st := f.d.Status()
		for _, n := range st.Nodes {
			for _, p := range n.Providers {
				if p.InFlight != 0 {
					return false
				}
			}
		}
		for _, m := range st.Models {
			if m.Pending != 0 {
				return false
			}
		}
		held, err := f.d.ledger.Held(context.Background(), keys)
		if err != nil {
			return false
		}
		for _, n := range held {
			if n != 0 {
				return false
			}
		}
		for _, w := range waits {
			if n, err := rdb.ZCard(context.Background(), w).Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
}
