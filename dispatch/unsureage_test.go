package dispatch

import (
	"net"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// A re-add followed by its lease's return in the same failed batch leaves
// no unsure entry: the batch runs in order if at all, and that return is
// never sent again to end the entry. The old code kept such an entry
// until the set was full and it was a TTL old.
func TestUnsureReaddReturnedInItsBatchIsNotRecorded(t *testing.T) {
	u := unsureReadds{}
	u.add([]cluster.Update{
		{Kind: cluster.OpReadd, ID: "e/1"},
		{Kind: cluster.OpReadd, ID: "e/2"},
		{Kind: cluster.OpReturn, ID: "e/1"},
	}, time.Now(), time.Minute)
	if _, ok := u["e/1"]; ok || len(u) != 1 {
		t.Fatalf("unsure holds %v, want only e/2 (e/1 was returned in its batch)", u)
	}
}

// deadAddr is a loopback address nothing listens on: a dial is refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// The returner's entries of unsure re-adds whose lease is never returned
// to it (the return failed, or was dropped on a full queue) are dropped
// once a TTL old by its own timer, long before the set is full: a failed
// batch arms the sweep, and the sweep keeps the younger entries and is
// armed again for the oldest of them.
func TestUnsureReaddsATTLOldAreSwept(t *testing.T) {
	const ttl = time.Minute
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: deadAddr(t), TTL: ttl, Timeout: time.Second, EdgeID: "e1"}, Options{})
	st := newReturnerState()
	defer st.timer.Stop()
	before := time.Now()
	f.d.applyBatch(st, []cluster.Update{{Kind: cluster.OpReadd, Key: cluster.Key("n", "p"), ID: "e1/lost"}}, ttl)
	if _, ok := st.unsure["e1/lost"]; !ok {
		t.Fatalf("the failed batch's re-add is not unsure: %v", st.unsure)
	}
	if st.sweepAt.Before(before.Add(ttl)) || st.timerAt.IsZero() {
		t.Fatalf("the failed batch armed no sweep a TTL on (sweep at %v, timer at %v)", st.sweepAt, st.timerAt)
	}

	// A TTL on (the entries' times moved back a TTL, as the clock is
	// real), the tick drops the old entry and keeps a young one.
	now := time.Now()
	st.unsure["e1/lost"] = now.Add(-ttl)
	st.unsure["e1/young"] = now.Add(-ttl / 2)
	st.sweepAt = now.Add(-time.Millisecond)
	st.outage = applyOutage{} // no probe: only the sweep is tested
	f.d.returnerTick(st, ttl)
	if _, ok := st.unsure["e1/lost"]; ok || len(st.unsure) != 1 {
		t.Fatalf("after the sweep unsure holds %v, want only e1/young", st.unsure)
	}
	if want := st.unsure["e1/young"].Add(ttl); !st.sweepAt.Equal(want) || st.timerAt.IsZero() {
		t.Fatalf("next sweep at %v (timer at %v), want %v, when e1/young is a TTL old", st.sweepAt, st.timerAt, want)
	}
	if next := st.unsure.expire(st.unsure["e1/young"].Add(ttl), ttl); !next.IsZero() || len(st.unsure) != 0 {
		t.Fatalf("a TTL after the last entry: unsure %v, next sweep %v; want empty, none", st.unsure, next)
	}
}
