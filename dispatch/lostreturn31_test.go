package dispatch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// lostReturnFixture is a cluster fixture on rs (lease TTL a minute) and a
// returner state of its own whose return of lease id failed while Redis
// was down. fenced: the lease's re-add went unanswered first (it may still
// be on its way), and the return was fenced for it. Otherwise Redis comes
// back holding the lease, as one that kept its data does: the plain
// return never reached it.
func lostReturnFixture(t *testing.T, rs *testredis.Server, id string, fenced bool) (*fixture, *returnerState) {
	t.Helper()
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"}, Options{})
	st := newReturnerState()
	t.Cleanup(func() { st.timer.Stop() })
	key := cluster.Key("n", "p")
	if fenced {
		st.unsure.add([]cluster.Update{{Kind: cluster.OpReadd, Key: key, ID: id}}, time.Now(), time.Minute)
	}
	rs.Stop()
	ret := []cluster.Update{{Kind: cluster.OpReturn, Key: key, ID: id}}
	f.d.applyBatch(st, ret, time.Minute)
	if ret[0].Fence != fenced || st.outage.batches != 1 {
		t.Fatalf("the return was fenced: %v, want %v; %d failed batches, want 1", ret[0].Fence, fenced, st.outage.batches)
	}
	rs.Restart()
	waitFor(t, "Redis to answer again", func() bool { return f.d.ledger.Ping(context.Background()) == nil })
	if !fenced {
		lease := redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: id}
		if err := rs.Client(t).ZAdd(context.Background(), key, lease).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return f, st
}

// A plain (unfenced) return whose batch Redis did not answer is sent
// again, plain, with the next batch, alone after the first probe Redis
// answers, and in the shutdown flush: the old code kept only fenced ones,
// and the lease held its slot in every edge's count until it expired.
func TestClusterLostPlainReturnIsResent(t *testing.T) {
	const ttl = time.Minute
	for _, tc := range []struct {
		name   string
		resend func(f *fixture, st *returnerState)
	}{
		{"with the next batch", func(f *fixture, st *returnerState) {
			f.d.applyBatch(st, []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "q"), ID: "e1/other"}}, ttl)
		}},
		{"after the probe", func(f *fixture, st *returnerState) {
			st.probeAt = time.Now()
			f.d.returnerTick(st, ttl)
		}},
		{"at shutdown", func(f *fixture, st *returnerState) {
			f.d.flushReturnsLost(nil, st.unsure, st.lost, ttl)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := testredis.Start(t)
			const id = "e1/lost"
			f, st := lostReturnFixture(t, rs, id, false)
			tc.resend(f, st)
			rdb := rs.Client(t)
			if inLedger(t, rdb, cluster.Key("n", "p"), id) {
				t.Fatal("the lost return was never sent again: the lease still holds its slot")
			}
			if rdb.Exists(context.Background(), "iop:returned:"+id).Val() != 0 {
				t.Fatal("a plain lost return was sent again fenced")
			}
			if tc.name != "at shutdown" && (len(st.lost) != 0 || st.outage.batches != 0) {
				t.Fatalf("after the resend: %d lost returns kept, %d failed batches; want none", len(st.lost), st.outage.batches)
			}
		})
	}
}

// A lost fenced return sent again and refused (out of memory: its mark may
// grow Redis) is kept, and sent again with a batch once lostRetry has
// passed, not with the very next one: the old code dropped it, and the
// re-add it was fenced for, still on its way, could hold the slot for a
// TTL. The batch is no outage either.
func TestClusterRefusedResendIsKeptAndRetriedLater(t *testing.T) {
	rs := testredis.Start(t)
	const id, ttl = "e1/lost", time.Minute
	f, st := lostFenceFixture(t, rs, id)
	ctx := context.Background()
	rdb := rs.Client(t)
	// Returns of another resource: their script is not the fenced one's,
	// whose mark is then its first write, which Redis refuses.
	other := func(n int) []cluster.Update {
		return []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "q"), ID: "e1/other" + strconv.Itoa(n)}}
	}
	restore := rs.OutOfMemory(t)
	f.d.applyBatch(st, other(1), ttl)
	restore()
	r, kept := st.lost[id]
	if !kept || !r.retryAt.After(time.Now()) || st.outage.batches != 0 {
		t.Fatalf("after a batch whose resent fenced return Redis refused: kept %v (retry at %v), %d failed batches; want it kept for later, no outage",
			kept, r.retryAt, st.outage.batches)
	}
	if rdb.Exists(ctx, "iop:returned:"+id).Val() != 0 {
		t.Fatal("the refused fenced return wrote its mark")
	}
	f.d.applyBatch(st, other(2), ttl)
	if _, kept := st.lost[id]; !kept || rdb.Exists(ctx, "iop:returned:"+id).Val() != 0 {
		t.Fatalf("the refused return was sent again with the very next batch (kept %v)", kept)
	}
	// Its retry time come (moved here rather than waited for).
	r.retryAt = time.Now()
	st.lost[id] = r
	f.d.applyBatch(st, other(3), ttl)
	if len(st.lost) != 0 {
		t.Fatalf("%d lost returns kept after the retry was answered", len(st.lost))
	}
	lateReaddHoldsNothing(t, f, rs, id)
}

// A batch of lost returns alone, sent right after the probe that ended
// their outage and failing, is an outage of the returns it carried: the
// old code counted one failed batch of 0 updates.
func TestClusterResendFailingAfterTheProbeCountsItsReturns(t *testing.T) {
	rs := testredis.Start(t)
	f, st := lostFenceFixture(t, rs, "e1/lost")
	// PING answers, every script waits: the probe is answered, the
	// resend's EVAL outlasts the ledger's 1 s timeout.
	rdb := rs.Client(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "10000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	st.probeAt = time.Now()
	f.d.returnerTick(st, time.Minute)
	if err := rdb.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if st.outage.batches != 1 || st.outage.updates != 1 {
		t.Fatalf("the resend after the probe: %d failed batches of %d updates; want 1 of 1 (the lost return)", st.outage.batches, st.outage.updates)
	}
	if len(st.lost) != 1 {
		t.Fatalf("%d lost returns kept after the resend failed, want 1", len(st.lost))
	}
}

// Past the bound, a fenced lost return takes the place of a plain one (a
// late re-add can put its lease back for a TTL; a plain one's lease only
// stays until it expires); a plain one finds no room.
func TestLostReturnsFencedTakeAPlainOnesPlace(t *testing.T) {
	const ttl = time.Minute
	now := time.Now()
	lost := lostReturns{}
	var plain []cluster.Update
	for i := range maxLost {
		plain = append(plain, cluster.Update{Kind: cluster.OpReturn, Key: "k", ID: "e/" + strconv.Itoa(i)})
	}
	lost.keep(plain, nil, now, ttl)
	lost.keep([]cluster.Update{
		{Kind: cluster.OpReturn, Key: "k", ID: "e/fenced", Fence: true},
		{Kind: cluster.OpReturn, Key: "k", ID: "e/plain"},
	}, map[string]time.Time{"e/fenced": now}, now, ttl)
	if len(lost) != maxLost {
		t.Fatalf("%d kept, want the bound %d", len(lost), maxLost)
	}
	if r, ok := lost["e/fenced"]; !ok || !r.fence {
		t.Fatal("a fenced return found no room among plain ones")
	}
	if _, ok := lost["e/plain"]; ok {
		t.Fatal("a plain return was kept past the bound")
	}
}
