package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Tick renews, marks the edge live and publishes its pending figures in
// one round trip (the pauser counts one pipeline), and reports what each
// did: the lease it renews is extended, the one Redis lost is missing,
// the liveness key and the figures are there. Before, these were three
// calls (Renew, Alive, SetPending), three round trips, each with a
// deadline of its own.
func TestATickIsOneRoundTrip(t *testing.T) {
	rdb, l, p, key, held := pausedWithLease(t)
	ctx := context.Background()
	lost := l.NewLeaseID()
	// Loads the scripts and warms the pool: the tick below makes only its
	// own round trip.
	if r := l.Tick(ctx, map[string][]HeldLease{key: {{ID: held}}}, nil); r.Renew != nil || r.Alive != nil || r.Pending != nil {
		t.Fatalf("first tick: %+v", r)
	}
	// Half the TTL spent: the renewal below must move it on.
	before := rdb.ZScore(ctx, key, held).Val() - 30000
	if err := rdb.ZAddXX(ctx, key, redis.Z{Score: before, Member: held}).Err(); err != nil {
		t.Fatal(err)
	}
	p.Trips.Store(0)
	r := l.Tick(ctx, map[string][]HeldLease{key: {{ID: held}, {ID: lost, Long: true}}}, map[string]int{"m": 2})
	if r.Renew != nil || r.Alive != nil || r.Pending != nil || !slices.Equal(r.Missing[key], []string{lost}) || len(r.Missing) != 1 {
		t.Fatalf("tick: %+v; want %s missing, no error", r, lost)
	}
	if n := p.Trips.Load(); n != 1 {
		t.Fatalf("a tick made %d round trips, want 1", n)
	}
	if after := rdb.ZScore(ctx, key, held).Val(); after <= before {
		t.Fatalf("lease %s not renewed: expiry %v then %v", held, before, after)
	}
	if ttl := rdb.PTTL(ctx, l.edgeKeys+"e").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("liveness mark expires in %v, want within the TTL", ttl)
	}
	if pending, err := l.Pending(ctx); err != nil || pending["m"] != 2 {
		t.Fatalf("pending after the tick: %v %v, want m: 2", pending, err)
	}
	// No figures: the edge leaves the set, its hash is gone.
	if r := l.Tick(ctx, nil, nil); r.Renew != nil || r.Alive != nil || r.Pending != nil {
		t.Fatalf("tick without figures: %+v", r)
	}
	if n := rdb.Exists(ctx, l.pendingKeys+"e", l.pendingEdges).Val(); n != 0 {
		t.Fatalf("%d pending keys left after a tick without figures, want none", n)
	}
}

// Each part of a Tick reports its own failure: a Redis out of memory
// refuses the renewal, the liveness mark and the figures alike
// (ErrRefused, Redis answered), and one that is down answers none
// (ErrUnavailable), whatever there was to renew.
func TestATickReportsEachPartsFailure(t *testing.T) {
	rs, l, _ := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	held := map[string][]HeldLease{key: {{ID: takeN(t, l, key, 1)[0]}}}
	restore := rs.OutOfMemory(t)
	r := l.Tick(ctx, held, map[string]int{"m": 1})
	restore()
	for name, err := range map[string]error{"renew": r.Renew, "alive": r.Alive, "pending": r.Pending} {
		if !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s out of memory: %v, want %v", name, err, ErrRefused)
		}
	}
	rs.Stop()
	for _, h := range []map[string][]HeldLease{held, nil} {
		r := l.Tick(ctx, h, nil)
		for name, err := range map[string]error{"alive": r.Alive, "pending": r.Pending} {
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s on a stopped Redis: %v, want %v", name, err, ErrUnavailable)
			}
		}
		if h != nil && !errors.Is(r.Renew, ErrUnavailable) {
			t.Errorf("renew on a stopped Redis: %v, want %v", r.Renew, ErrUnavailable)
		}
	}
}
