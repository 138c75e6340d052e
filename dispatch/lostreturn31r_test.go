package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// A failed batch keeps its returns only: its waiters' registrations and
// removals and its re-adds are not sent again as returns.
func TestLostReturnsKeepOnlyReturns(t *testing.T) {
	lost := lostReturns{}
	lost.keep([]cluster.Update{
		{Kind: cluster.OpWait, Key: "w", ID: "e/w1:0"},
		{Kind: cluster.OpReadd, Key: "k", ID: "e/1"},
		{Kind: cluster.OpReturn, Key: "k", ID: "e/2"},
		{Kind: cluster.OpUnwait, Key: "w", ID: "e/w1:0"},
	}, nil, time.Now(), time.Minute)
	if _, ok := lost["e/2"]; len(lost) != 1 || !ok {
		t.Fatalf("kept %v, want the return e/2 alone", lost)
	}
}

// A fenced lost return expires a TTL after its lease's re-add was sent,
// not a TTL after its batch failed: a command lost that long is not run
// any more.
func TestLostFencedReturnExpiresATTLAfterItsReadd(t *testing.T) {
	const ttl = time.Minute
	now := time.Now()
	readd := now.Add(-ttl / 2)
	lost := lostReturns{}
	lost.keep([]cluster.Update{{Kind: cluster.OpReturn, Key: "k", ID: "e/1", Fence: true}},
		map[string]time.Time{"e/1": readd}, now, ttl)
	if next := lost.expire(now, ttl); !next.Equal(readd.Add(ttl)) {
		t.Fatalf("lost fenced return expires at %v, want a TTL after its re-add (%v)", next, readd.Add(ttl))
	}
}

// A return of the batch that Redis refused on its first send is kept,
// waiting lostRetry, fenced (the re-add it was fenced for may still be on
// its way) or plain (its slot would be taken until its lease expires).
func TestRefusedFirstSendKeepsItsReturns(t *testing.T) {
	rs := testredis.Start(t)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"}, Options{})
	st := newReturnerState()
	t.Cleanup(func() { st.timer.Stop() })
	key := cluster.Key("n", "p")
	st.unsure.add([]cluster.Update{{Kind: cluster.OpReadd, Key: key, ID: "e1/fenced"}}, time.Now(), time.Minute)
	// q holds another program's value: its return is refused (WRONGTYPE),
	// p's fenced one for its mark (out of memory).
	if err := rs.Client(t).Set(context.Background(), cluster.Key("n", "q"), "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	restore := rs.OutOfMemory(t)
	before := time.Now()
	f.d.applyBatch(st, []cluster.Update{
		{Kind: cluster.OpReturn, Key: key, ID: "e1/fenced"},
		{Kind: cluster.OpReturn, Key: cluster.Key("n", "q"), ID: "e1/plain"},
	}, time.Minute)
	restore()
	if r, ok := st.lost["e1/plain"]; !ok || r.fence || r.retryAt.Before(before.Add(lostRetry)) {
		t.Fatalf("the plain return refused on its first send: kept %v (%+v); want it kept, plain, waiting lostRetry", ok, r)
	}
	r, ok := st.lost["e1/fenced"]
	if !ok || !r.fence || r.retryAt.Before(before.Add(lostRetry)) {
		t.Fatalf("the fenced return refused on its first send: kept %v (%+v); want it kept, fenced, waiting lostRetry", ok, r)
	}
}

// The shutdown flush sends the lost returns waiting after a refusal too:
// it is their last chance.
func TestShutdownFlushSendsRefusedLostReturnsWaiting(t *testing.T) {
	rs := testredis.Start(t)
	const id = "e1/lost"
	f, st := lostReturnFixture(t, rs, id, false)
	r := st.lost[id]
	r.retryAt = time.Now().Add(time.Hour)
	st.lost[id] = r
	f.d.flushReturnsLost(nil, st.unsure, st.lost, time.Minute)
	if inLedger(t, rs.Client(t), cluster.Key("n", "p"), id) {
		t.Fatal("the shutdown flush left out a lost return waiting after a refusal")
	}
}

// Resent returns count in an outage once: the caller passes those the
// outage has not counted yet (lostReturns.count), none in the batches
// after the one that opened it when no return was refused meanwhile.
func TestOutageCountsResentReturnsOnce(t *testing.T) {
	var o applyOutage
	err := errors.New("down")
	o.record(zap.NewNop(), 2, 3, err)
	o.record(zap.NewNop(), 1, 0, err)
	if o.batches != 2 || o.updates != 6 {
		t.Fatalf("%d failed batches of %d updates, want 2 of 6 (2+3, then 1)", o.batches, o.updates)
	}
}

// Every resent return Redis refused is kept, waiting lostRetry, not only
// the first; the one it applied between them is forgotten.
func TestAnsweredKeepsEveryRefusedResend(t *testing.T) {
	now := time.Now()
	lost := lostReturns{}
	send := []cluster.Update{
		{Kind: cluster.OpReturn, Key: "k", ID: "e/batch"},
		{Kind: cluster.OpReturn, Key: "k", ID: "e/1", Fence: true},
		{Kind: cluster.OpReturn, Key: "q", ID: "e/2"},
		{Kind: cluster.OpReturn, Key: "k", ID: "e/3"},
	}
	lost.keep(send[1:], map[string]time.Time{"e/1": now}, now, time.Minute)
	lost.answered(send, 1, []int{1, 3}, nil, now, time.Minute)
	for _, id := range []string{"e/1", "e/3"} {
		if r, ok := lost[id]; !ok || !r.retryAt.Equal(now.Add(lostRetry)) {
			t.Fatalf("refused resend %s: kept %v (%+v), want it kept until lostRetry after now", id, ok, r)
		}
	}
	if _, ok := lost["e/2"]; ok || len(lost) != 2 {
		t.Fatalf("kept %v, want the applied resend e/2 forgotten", lost)
	}
}
