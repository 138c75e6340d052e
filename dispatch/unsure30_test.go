package dispatch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// lostFenceFixture is a cluster fixture on rs (lease TTL a minute) and a
// returner state of its own whose fenced return of lease id failed while
// Redis was down: the lease's re-add went unanswered first (it may still
// be on its way), then the return that fenced it.
func lostFenceFixture(t *testing.T, rs *testredis.Server, id string) (*fixture, *returnerState) {
	t.Helper()
	return lostReturnFixture(t, rs, id, true)
}

// lateReaddHoldsNothing checks that lease id is fenced in rs's ledger, and
// that its late re-add (the one its return's batch was fenced for) does
// not put it back.
func lateReaddHoldsNothing(t *testing.T, f *fixture, rs *testredis.Server, id string) {
	t.Helper()
	ctx := context.Background()
	rdb := rs.Client(t)
	if rdb.Exists(ctx, "iop:returned:"+id).Val() != 1 {
		t.Fatal("the lost fenced return was never sent again: the lease is not fenced")
	}
	key := cluster.Key("n", "p")
	if err := f.d.ledger.Apply(ctx, []cluster.Update{{Kind: cluster.OpReadd, Key: key, ID: id}}); err != nil {
		t.Fatal(err)
	}
	if inLedger(t, rdb, key, id) {
		t.Fatal("a late re-add put the returned lease back")
	}
}

// A fenced return whose batch Redis did not answer is sent again, fenced,
// with the next batch: the old code forgot it with its unsure entry, and
// a re-add still on its way held the slot, for nobody, for a TTL.
func TestClusterLostFencedReturnIsResentWithNextBatch(t *testing.T) {
	rs := testredis.Start(t)
	const id = "e1/lost"
	f, st := lostFenceFixture(t, rs, id)
	f.d.applyBatch(st, []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "p"), ID: "e1/other"}}, time.Minute)
	if len(st.lost) != 0 {
		t.Fatalf("lost fenced returns still kept after an applied batch: %v", st.lost)
	}
	lateReaddHoldsNothing(t, f, rs, id)
}

// With no batch after the outage, the first probe Redis answers sends the
// lost fenced return.
func TestClusterLostFencedReturnIsResentAtProbe(t *testing.T) {
	rs := testredis.Start(t)
	const id = "e1/lost"
	f, st := lostFenceFixture(t, rs, id)
	st.probeAt = time.Now()
	f.d.returnerTick(st, time.Minute)
	if len(st.lost) != 0 || st.outage.batches != 0 {
		t.Fatalf("after the probe: %d lost fenced returns kept, %d failed batches counted", len(st.lost), st.outage.batches)
	}
	lateReaddHoldsNothing(t, f, rs, id)
}

// The lost fenced returns are bounded (maxLost, stale ones dropped
// first), each is forgotten a TTL after its re-add was sent (a command
// lost that long is not run any more), and at most ledgerBatch ride along
// with one batch.
func TestLostFencesBoundAndExpiry(t *testing.T) {
	const ttl = time.Minute
	t0 := time.Now()
	lost := lostReturns{}
	fenced := map[string]time.Time{}
	var batch []cluster.Update
	for i := range maxLost + 1 {
		id := "e/" + strconv.Itoa(i)
		fenced[id] = t0
		batch = append(batch, cluster.Update{Kind: cluster.OpReturn, Key: "k", ID: id, Fence: true})
	}
	batch = append(batch, cluster.Update{Kind: cluster.OpReturn, Key: "k", ID: "e/unfenced"})
	lost.keep(batch, fenced, t0, ttl)
	if len(lost) != maxLost {
		t.Fatalf("kept %d lost fenced returns, want the bound %d", len(lost), maxLost)
	}
	if _, ok := lost["e/unfenced"]; ok {
		t.Fatal("a plain return was kept past the bound, which fenced ones filled")
	}
	resent := lost.resend(nil, t0.Add(ttl-time.Millisecond), ttl, ledgerBatch)
	if len(resent) != ledgerBatch {
		t.Fatalf("%d returns resent with one batch, want %d", len(resent), ledgerBatch)
	}
	for _, u := range resent {
		if u.Kind != cluster.OpReturn || !u.Fence || u.Key != "k" {
			t.Fatalf("resent %+v, want a fenced return of k", u)
		}
	}
	if next := lost.expire(t0.Add(ttl-time.Millisecond), ttl); !next.Equal(t0.Add(ttl)) || len(lost) != maxLost {
		t.Fatalf("expire before a TTL: next %v, %d kept", next, len(lost))
	}
	// Past the bound, the stale ones make room.
	lost.keep([]cluster.Update{{Kind: cluster.OpReturn, Key: "k", ID: "e/new", Fence: true}},
		map[string]time.Time{"e/new": t0.Add(ttl)}, t0.Add(ttl), ttl)
	if _, ok := lost["e/new"]; !ok || len(lost) != 1 {
		t.Fatalf("with every entry a TTL old, %d kept (new one kept: %v), want only the new one", len(lost), ok)
	}
	if got := lost.resend(nil, t0.Add(2*ttl), ttl, ledgerBatch); len(got) != 0 || len(lost) != 0 {
		t.Fatalf("a TTL after its re-add, %d resent and %d kept, want none", len(got), len(lost))
	}
}

// At shutdown the lost fenced returns are sent first, fenced.
func TestClusterLostFencedReturnIsSentAtShutdown(t *testing.T) {
	rs := testredis.Start(t)
	const id = "e1/lost"
	f, st := lostFenceFixture(t, rs, id)
	f.d.flushReturnsLost(nil, st.unsure, st.lost, time.Minute)
	lateReaddHoldsNothing(t, f, rs, id)
}
