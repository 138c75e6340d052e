package dispatch

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Mutants of the Responses id sharing (responses.go) that no test can
// tell from the code, so none is written for them:
//   - shareLast without its len(batch) == 0 check: an empty batch is no
//     round trip (RememberResponses returns at once) and reports success,
//     so the loop only spins out its bounded count.
//   - shareLast without its CloseFlush bound: each batch is bounded by the
//     ledger's timeout and the loop stops at the first failure, so the
//     bound only matters for a Redis answering every batch just in time.
//   - learnResponse without its owner == "" check: no resource has an
//     empty ledger key, so the loop finds none.
//   - learnResponse without the second look at d.responses (answered here
//     between the lookup and the record): only a RememberResponse racing
//     the lookup reaches it, which no test can order from outside.
//   - lookupFailed marking the ledger down at Close too: grants fail at
//     Close anyway (ErrClosed), whatever ledgerDownUntil says.

// pastDeadline is a context whose deadline has passed but whose Err is
// still nil, as a request's context is in the moment between its
// deadline and its timer marking it done: a Redis call made in it fails
// at once with an i/o timeout (go-redis sets its conn deadline from the
// context's) although the context does not say it has ended.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// A lookup cut short by its request's own deadline says nothing of Redis
// (item 417): grants go on, even when the context has not yet noticed its
// deadline (Err nil). A lookup of a request with no deadline that Redis
// does not answer does mark the ledger down: there a timeout is Redis's.
func TestLookupEndedByItsDeadlineOnly38m(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", 300*time.Millisecond)
	down := func() bool {
		e.d.mu.Lock()
		defer e.d.mu.Unlock()
		return time.Now().Before(e.d.ledgerDownUntil)
	}
	e.d.learnResponse(pastDeadline{context.Background()}, "m", "resp_late")
	if down() {
		t.Error("a lookup cut short by the request's passed deadline (Err still nil) marked the ledger down")
	}
	ctx := context.Background()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer rs.Stop() // not left to answer the dispatcher's last returns when the pause ends
	e.d.learnResponse(ctx, "m", "resp_silent")
	if !down() {
		t.Error("a lookup of a request without a deadline that Redis did not answer left grants to wait on it")
	}
}

// A full queue of ids at Close (responseShareQueue of them, behind a batch
// held in flight) is written to the last id: shareLast's round trips
// cover the whole queue, not just most of it.
func TestResponseIDsFullQueueAtCloseAreShared38m(t *testing.T) {
	_, rdb, e, l := shareEdge(t, 20*time.Second)
	l.Release(ReasonCompleted)
	unpause := holdShareWriter(t, rdb, e, "resp_0", l) // the rest queue behind resp_0's batch
	const n = 1 + responseShareQueue
	keys := []string{"iop:resp:resp_0"}
	for i := 1; i < n; i++ {
		id := "resp_" + strconv.Itoa(i)
		e.d.RememberResponse(id, l)
		keys = append(keys, "iop:resp:"+id)
	}
	if q := len(e.d.shareResp.q); q != responseShareQueue {
		t.Fatalf("%d ids queued, want a full queue (%d)", q, responseShareQueue)
	}
	closeThenUnpause(t, e, unpause)
	ctx := context.Background()
	if got := rdb.Exists(ctx, keys...).Val(); got != n {
		t.Errorf("%d of the %d ids remembered before Close reached Redis", got, n)
	}
}

// The writer's bounds as docs/cluster.md states them, by what Redis and
// the counters see: a queue of 1,024 ids (the 1,100 remembered behind a
// batch held in flight lose 76, counted queue_full) and batches of up to
// 128 (the first queued batch, refused because one of its ids is a key
// this edge may not write, counts exactly 128 ids write_failed, though
// Redis took the others of that pipeline).
func TestResponseShareBoundsAsDocumented38m(t *testing.T) {
	_, rdb, e, l := shareEdge(t, 20*time.Second)
	l.Release(ReasonCompleted)
	ctx := context.Background()
	unpause := holdShareWriter(t, rdb, e, "ok_0", l) // the rest queue behind ok_0's batch
	e.d.RememberResponse("bad", l)
	const more = 1100
	for i := 1; i < more; i++ {
		e.d.RememberResponse("ok_"+strconv.Itoa(i), l)
	}
	unshared := func(reason string) float64 {
		return counterValue(t, e, "iop_response_ids_unshared_total", "reason", reason)
	}
	if q := unshared("queue_full"); q != more-1024 {
		t.Errorf("queue_full %v after %d ids behind a held batch, want %d (a queue of 1,024)", q, more, more-1024)
	}
	// Every key readable; writes only to the ok_ ids: "bad", first in
	// the queue, fails the first batch written after the pause.
	if err := rdb.Do(ctx, "ACL", "SETUSER", "default", "resetkeys", "~iop:resp:ok_*", "%R~*").Err(); err != nil {
		t.Fatal(err)
	}
	unpause()
	last := "iop:resp:ok_1023" // the queue's last id: "bad" and ok_1 to ok_1023
	waitRedisKey(t, rdb, last)
	waitFor(t, "the queue drained", func() bool { return len(e.d.shareResp.q) == 0 })
	if w := unshared("write_failed"); w != 128 {
		t.Errorf("write_failed %v, want 128: the one refused batch of 128 ids", w)
	}
	if rdb.Exists(ctx, "iop:resp:ok_1024").Val() != 0 {
		t.Error("ok_1024, past the queue's bound, reached Redis")
	}
}

// An id remembered just before Close, which the writer takes from the
// queue only once Close has begun, is still written: the writer's batch
// does not run in the dispatcher's context, which Close cancels (go-redis
// fails a call whose context is done before it sends anything). With one
// P the writer, readied by the id, runs only once Close has cancelled
// and waits; on more it usually runs first, which the code passes too.
func TestResponseIDTakenAfterCloseBeganIsShared38m(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := range 5 {
		e := clusterEdge(t, rs, "e"+strconv.Itoa(i), 20*time.Second)
		l := mustAcquire(t, e.d, Request{Model: "only-p2"})
		l.Release(ReasonCompleted)
		id := "resp_close_" + strconv.Itoa(i)
		e.d.RememberResponse(id, l)
		e.d.Close()
		if rdb.Exists(context.Background(), "iop:resp:"+id).Val() != 1 {
			t.Fatalf("edge %d: the id remembered just before Close never reached Redis", i)
		}
	}
}

// An id this edge keeps for one provider is never shared for another:
// when its first write was lost (the queue was full), a second provider
// echoing it later (broken or hostile, see RememberResponse) must not
// become its owner for the other edges either.
func TestEchoedIDNotSharedForTheEchoer38m(t *testing.T) {
	_, rdb, e, p2 := shareEdge(t, 20*time.Second)
	p1 := mustAcquire(t, e.d, Request{Model: "m"})
	if p1.ProviderID != "p1" {
		t.Fatalf("went to %s, want p1", p1.ProviderID)
	}
	ctx := context.Background()
	unpause := holdShareWriter(t, rdb, e, "resp_held", p2)
	for i := range responseShareQueue {
		e.d.RememberResponse("resp_"+strconv.Itoa(i), p2)
	}
	e.d.RememberResponse("resp_x", p2) // the queue is full: not shared
	if e.d.shareResp.dropped.Load() != 1 {
		t.Fatalf("%d ids dropped, want resp_x only", e.d.shareResp.dropped.Load())
	}
	unpause()
	waitFor(t, "the queue drained", func() bool { return len(e.d.shareResp.q) == 0 })
	e.d.RememberResponse("resp_x", p1)      // the echo
	e.d.RememberResponse("resp_marker", p2) // queued after any write of the echo
	waitRedisKey(t, rdb, "iop:resp:resp_marker")
	if v, err := rdb.Get(ctx, "iop:resp:resp_x").Result(); err == nil {
		t.Errorf("Redis holds %q for resp_x, which this edge keeps for p2: the echo was shared", v)
	}
}
