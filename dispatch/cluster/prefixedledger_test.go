package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Under a prefix of its own, a waiter of another live edge of the same
// deployment is still yielded to: the take script reads the liveness keys
// under the deployment's prefix, where Alive writes them.
func TestPrefixedTakeYieldsToALiveEdgeOfItsDeployment(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a, b := prefixed(t, rs.Addr, "a1", "blue"), prefixed(t, rs.Addr, "b1", "blue")
	wait := WaitKey("m", 0)
	if err := b.Alive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, []Update{{Kind: OpWait, Key: wait, ID: b.NewWaiterID(MaxShift)}}); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Take(ctx, Key("n", "p"), 1, 1, false, a.NewLeaseID(), wait, "", 0, 0); out != Yield || err != nil {
		t.Fatalf("take beside an older waiter of a live edge of the deployment: %v %v, want Yield", out, err)
	}
}

// Under a prefix, a take without a wait set ("") skips the fairness check
// as under the default one: it does not read the key named by the prefix
// alone, which another program may hold.
func TestPrefixedTakeWithoutWaitSetReadsNoOtherKey(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := prefixed(t, rs.Addr, "a1", "blue")
	if err := l.Client().Set(ctx, "blue", "another program's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Take(ctx, Key("n", "p"), 1, 1, false, l.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take without a wait set: %v %v, want Taken", out, err)
	}
}

// Under a prefix, Renew reports the lost leases by the key the caller
// named (Key's spelling), which is what the caller's re-add is sent with.
func TestPrefixedRenewReportsLostLeasesByTheCallersKey(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := prefixed(t, rs.Addr, "a1", "blue")
	key := Key("n", "p")
	id := l.NewLeaseID()
	if out, err := l.Take(ctx, key, 1, 1, false, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	if err := l.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	missing, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}})
	if err != nil || len(missing) != 1 || len(missing[key]) != 1 {
		t.Fatalf("missing %v (%v), want %s on %s", missing, err, id, key)
	}
}

// A long lease missing from the long set only (its entry there expired or
// was removed) counts as lost: put back, it counts against the long
// capacity again.
func TestRenewReportsALongLeaseMissingFromTheLongSet(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := ledger(t, rs.Addr, "a", time.Minute)
	key := Key("n", "p")
	id := l.NewLeaseID()
	if out, err := l.Take(ctx, key, 2, 1, true, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	if err := l.Client().ZRem(ctx, key+":long", id).Err(); err != nil {
		t.Fatal(err)
	}
	missing, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id, Long: true}}})
	if err != nil || len(missing[key]) != 1 {
		t.Fatalf("missing %v (%v), want the long lease", missing, err)
	}
}

// Renew and OpReadd leave a key of another type (another program's value
// under the ledger's names) as they found it: no expiry is set on it, and
// the re-add does not fail the batch it is in.
func TestRenewAndReaddLeaveAKeyOfAnotherTypeAlone(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := ledger(t, rs.Addr, "a", time.Minute)
	key := Key("n", "p")
	rdb := l.Client()
	if err := rdb.Set(ctx, key+":long", "another program's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, key, "another program's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: "a/1", Long: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReadd, Key: key, ID: "a/1", Long: true}}); err != nil {
		t.Fatalf("re-add onto a key of another type: %v", err)
	}
	for _, k := range []string{key, key + ":long"} {
		if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl != -1 {
			t.Fatalf("%s: ttl %v (%v), want none", k, ttl, err)
		}
		if v, err := rdb.Get(ctx, k).Result(); err != nil || v != "another program's" {
			t.Fatalf("%s: %q (%v)", k, v, err)
		}
	}
}

// A short lease put back is in the leases only, not the long ones, and the
// sets it is put back in expire (a flushed Redis must not keep them for
// ever).
func TestReaddOfAShortLease(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := ledger(t, rs.Addr, "a", time.Minute)
	key := Key("n", "p")
	if err := l.Apply(ctx, []Update{{Kind: OpReadd, Key: key, ID: "a/1"}}); err != nil {
		t.Fatal(err)
	}
	rdb := l.Client()
	if n, err := rdb.Exists(ctx, key+":long").Result(); err != nil || n != 0 {
		t.Fatalf("long set exists: %d (%v)", n, err)
	}
	if ttl, err := rdb.PTTL(ctx, key).Result(); err != nil || ttl <= 0 {
		t.Fatalf("ttl of the leases %v (%v), want one", ttl, err)
	}
	if _, err := rdb.ZScore(ctx, key, "a/1").Result(); err == redis.Nil {
		t.Fatal("the lease was not put back")
	}
}

// Close returns as soon as the work of Go has ended, not after CloseWait.
func TestCloseReturnsWhenTheWorkOfGoEnds(t *testing.T) {
	rs := testredis.Start(t)
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "a"})
	proceed := make(chan struct{})
	if !l.Go(func() { <-proceed }) {
		t.Fatal("Go refused before Close")
	}
	closed := closeBegun(t, l)
	close(proceed)
	select {
	case <-closed:
	case <-time.After(CloseWait * 3 / 4):
		t.Fatal("Close waited out CloseWait after the work of Go ended")
	}
}

// An announcement is read as a key of this ledger only when it begins
// with the ledger's prefix and its ':': not one of a deployment whose
// prefix merely begins the same, nor the bare prefix.
func TestFreedKeyReadsOnlyItsOwnPrefix(t *testing.T) {
	l := Open(Config{Address: "127.0.0.1:1", TTL: time.Minute, Timeout: time.Second, EdgeID: "a", KeyPrefix: "blue"})
	defer l.Close()
	for payload, want := range map[string]string{
		"blue:lease:n/p":  Key("n", "p"),
		"bluer:lease:n/p": "",
		"blue":            "",
		"iop:lease:n/p":   "",
		"green:lease:n/p": "",
		"blu":             "",
	} {
		if got := l.FreedKey(payload); got != want {
			t.Errorf("FreedKey(%q) = %q, want %q", payload, got, want)
		}
	}
}
