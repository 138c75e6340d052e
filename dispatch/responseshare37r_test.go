package dispatch

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testwait"
)

// The ids an edge remembered just before Close (the answers its HTTP
// drain relayed last: Edge.Close closes the dispatcher after the drain)
// still reach Redis: the batch in flight is not cut off, and the ids
// queued behind it are written before the writer stops. Other edges need
// exactly these once this one is gone.
func TestResponseIDsQueuedAtCloseAreShared37r(t *testing.T) {
	c := closeBehindBatch37r(t, nil)
	missing := 0
	for i := range c.n {
		if c.rdb.Exists(context.Background(), "iop:resp:resp_"+strconv.Itoa(i)).Val() != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d ids remembered before Close never reached Redis", missing, c.n)
	}
}

// closedBehind is what closeBehindBatch37r leaves: the ids resp_0 to
// resp_<n-1> remembered, and the failed batches counted before Close.
type closedBehind struct {
	e      *fixture
	rdb    *redis.Client
	n      int
	before uint64
}

// closeBehindBatch37r closes an edge while its writer's batch (resp_0)
// is held by a paused Redis and more ids wait in the queue behind it;
// before runs once they are queued, Redis still paused. The pause ends
// once Close has begun.
func closeBehindBatch37r(t *testing.T, before func(rdb *redis.Client)) closedBehind {
	t.Helper()
	_, rdb, e, l := shareEdge(t, 20*time.Second)
	l.Release(ReasonCompleted)
	unpause := holdShareWriter(t, rdb, e, "resp_0", l)
	const n = 3 * responseShareBatch
	for i := 1; i < n; i++ {
		e.d.RememberResponse("resp_"+strconv.Itoa(i), l)
	}
	if before != nil {
		before(rdb)
	}
	c := closedBehind{e: e, rdb: rdb, n: n, before: e.d.shareResp.failed.Load()}
	closeThenUnpause(t, e, unpause)
	return c
}

// Redis silent at Close: the last writes give up after one failed batch,
// so Close waits one ledger timeout more, not one per queued batch.
func TestResponseShareCloseRedisSilent37r(t *testing.T) {
	rs, rdb, e, l := shareEdge(t, 300*time.Millisecond)
	l.Release(ReasonCompleted)
	ctx := context.Background()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer rs.Stop() // not left to answer anything when the pause ends
	// The writer holds the first batch until its timeout; the rest
	// (several batches) wait in the queue for Close.
	e.d.RememberResponse("resp_0", l)
	waitFor(t, "the first batch taken", func() bool { return len(e.d.shareResp.q) == 0 })
	for i := 1; i < responseShareQueue; i++ {
		e.d.RememberResponse("resp_"+strconv.Itoa(i), l)
	}
	before := e.d.shareResp.failed.Load()
	queued := len(e.d.shareResp.q)
	e.d.Close()
	// The batch in flight, then one last batch: not one per queued batch.
	if f := e.d.shareResp.failed.Load() - before; f > 2 {
		t.Errorf("%d batches failed at Close (%d ids queued), want at most 2 (the one in flight and one last)", f, queued)
	}
	if queued <= 2*responseShareBatch {
		t.Fatalf("only %d ids queued at Close: the test needs more than two batches", queued)
	}
}

// A batch Redis fails at Close is the last one: whether it was the batch
// in flight when Close began (no batch is tried after it) or the first of
// the ids still queued (no further batch is tried). Redis here answers
// the batch in flight and refuses every later write (an ACL letting this
// edge write resp_0's key only), so each try costs no timeout and the
// count of failed batches is exact.
func TestResponseShareCloseStopsAtFailure37r(t *testing.T) {
	for _, tc := range []struct {
		name     string
		writable string // the one response key writes may reach
		inflight bool   // the batch in flight is written
	}{
		{"in flight written, first queued refused", "iop:resp:resp_0", true},
		{"in flight refused", "iop:resp:none", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every key readable, one writable: applied when the paused
			// batch runs.
			c := closeBehindBatch37r(t, func(rdb *redis.Client) {
				if err := rdb.Do(context.Background(), "ACL", "SETUSER", "default", "resetkeys", "~"+tc.writable, "%R~*").Err(); err != nil {
					t.Fatal(err)
				}
			})
			if got := c.rdb.Exists(context.Background(), "iop:resp:resp_0").Val() == 1; got != tc.inflight {
				t.Errorf("resp_0 (the batch in flight) in Redis: %v, want %v", got, tc.inflight)
			}
			if f := c.e.d.shareResp.failed.Load() - c.before; f != 1 {
				t.Errorf("%d batches failed at Close, want 1: none is tried after a failure", f)
			}
		})
	}
}

// holdShareWriter pauses rdb's writes and remembers first for l on e, so
// that the writer's batch of first is held in flight once it returns and
// ids remembered from then on wait in the queue behind it. unpause ends
// the pause; it is safe to call again, and the test's cleanup calls it.
func holdShareWriter(t *testing.T, rdb *redis.Client, e *fixture, first string, l *Lease) (unpause func()) {
	t.Helper()
	unpause = pauseShareWrites(t, rdb)
	e.d.RememberResponse(first, l)
	waitSetPaused(t, rdb)
	return unpause
}

// pauseShareWrites has Redis hold every write for 30 s (CLIENT PAUSE
// WRITE), far past waitDeadline. unpause ends the pause; it is safe to
// call again, and the test's cleanup calls it.
func pauseShareWrites(t *testing.T, rdb *redis.Client) (unpause func()) {
	t.Helper()
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Errorf("unpause: %v", err)
			}
		})
	}
	t.Cleanup(unpause)
	return unpause
}

// closeThenUnpause closes e while Redis is paused and ends the pause once
// Close has begun, then waits for Close to return.
func closeThenUnpause(t *testing.T, e *fixture, unpause func()) {
	t.Helper()
	closed := make(chan struct{})
	// Owner: this test; ends when Close returns (once the pause ends).
	go func() {
		defer close(closed)
		e.d.Close()
	}()
	waitFor(t, "Close began", func() bool { return e.d.ctx.Err() != nil })
	unpause()
	testwait.Recv(t, closed, waitDeadline, "Close to return")
}

// waitSetPaused waits until a client of the paused Redis rdb is held on
// a SET: the writer's batch is in flight, so that ids remembered from
// now on wait in the queue behind it.
func waitSetPaused(t *testing.T, rdb *redis.Client) {
	t.Helper()
	waitFor(t, "a SET held by the pause", func() bool {
		for _, c := range strings.Split(rdb.ClientList(context.Background()).Val(), "\n") {
			if strings.Contains(c, " flags=b ") && strings.Contains(c, " cmd=set ") {
				return true
			}
		}
		return false
	})
}
