package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A lost fenced return sent again and refused (out of memory: its mark
// may grow Redis, the plain returns of its batch may not) is dropped, not
// sent with every later batch: Redis answered it, and a refused fenced
// return takes no effect (its lease stays until it expires). The batch is
// no outage either.
func TestClusterRefusedResendOfALostFenceIsDropped(t *testing.T) {
	rs := testredis.Start(t)
	const id = "e1/lost"
	f, st := lostFenceFixture(t, rs, id)
	ctx := context.Background()
	rdb := rs.Client(t)
	restore := rs.OutOfMemory(t)
	f.d.applyBatch(st, []cluster.Update{{Kind: cluster.OpReturn, Key: cluster.Key("n", "p"), ID: "e1/other"}}, time.Minute)
	restore()
	if len(st.lost) != 0 || st.outage.batches != 0 {
		t.Fatalf("after a batch whose resent fenced return Redis refused: %d lost fenced returns kept, %d failed batches counted; want none", len(st.lost), st.outage.batches)
	}
	if n := rdb.Exists(ctx, "iop:returned:"+id).Val(); n != 0 {
		t.Fatal("the refused fenced return wrote its mark")
	}
}

// A failed batch whose only remembered entry is a lost fenced return
// (its unsure re-add ended when the return was fenced) arms the sweep
// that forgets it a TTL after its re-add, as unsure entries do: without
// it the entry stayed until a later batch or answered probe resent it.
func TestReturnerLostFenceAloneArmsTheSweep(t *testing.T) {
	rs := testredis.Start(t)
	_, st := lostFenceFixture(t, rs, "e1/lost")
	if len(st.unsure) != 0 || len(st.lost) != 1 {
		t.Fatalf("fixture: %d unsure, %d lost; want 0 and 1", len(st.unsure), len(st.lost))
	}
	if st.sweepAt.IsZero() || st.sweepAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("sweep at %v, want it armed within a TTL", st.sweepAt)
	}
}
