package dispatch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testwait"
)

// A remembered id's shared channel closes once its write to Redis ended,
// and not before: at that moment another edge's lookup finds it. The
// gateway writes a held Responses answer only then, so a follow-up sent
// at once through another edge is pinned as well.
func TestSharedClosesOnceTheIDIsInRedis39(t *testing.T) {
	_, rdb, e, l := shareEdge(t, 5*time.Second)
	unpause := holdShareWriter(t, rdb, e, "resp_first", l)
	shared := e.d.RememberResponse("resp_second", l)
	if shared == nil {
		t.Fatal("RememberResponse with a ledger: no channel to wait on")
	}
	select {
	case <-shared:
		t.Fatal("shared closed while Redis held the writes")
	case <-time.After(100 * time.Millisecond):
	}
	unpause()
	testwait.Recv(t, shared, waitDeadline, "the shared channel once Redis took the write")
	if rdb.Exists(context.Background(), "iop:resp:resp_second").Val() != 1 {
		t.Fatal("shared closed before the id was in Redis")
	}
	// Remembered for another provider: kept for the first, nothing queued.
	other := mustAcquire(t, e.d, Request{Model: "m"})
	defer other.Release(ReasonCompleted)
	if other.ProviderID != "p1" {
		t.Fatalf("the other lease is on %s, want p1", other.ProviderID)
	}
	if again := e.d.RememberResponse("resp_second", other); again != nil {
		t.Error("an id kept for its first provider got a channel of a write never queued")
	}
}

// Without a ledger nothing is shared, so nothing is waited for.
func TestSharedNilWithoutLedger39(t *testing.T) {
	f := newFixture(t, twoProviderCfg(t), nil)
	f.up("a")
	l := mustAcquire(t, f.d, Request{Model: "only-p2"})
	defer l.Release(ReasonCompleted)
	if shared := f.d.RememberResponse("resp_1", l); shared != nil {
		t.Fatal("a channel without a ledger")
	}
}

// AwaitShared is bounded by the ledger's timeout when Redis holds the
// write past it, and by the caller's context.
func TestAwaitSharedBounded39(t *testing.T) {
	const timeout = 400 * time.Millisecond
	_, rdb, e, l := shareEdge(t, timeout)
	holdShareWriter(t, rdb, e, "resp_first", l) // paused for 30 s
	shared := e.d.RememberResponse("resp_second", l)
	if shared == nil {
		t.Fatal("no channel")
	}
	start := time.Now()
	e.d.AwaitShared(context.Background(), shared)
	if took := time.Since(start); took < timeout || took > timeout+5*time.Second {
		t.Fatalf("AwaitShared returned after %v with the write held, want about the ledger's timeout %v", took, timeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	e.d.AwaitShared(ctx, shared)
	if took := time.Since(start); took > timeout/2 {
		t.Fatalf("AwaitShared on an ended context took %v", took)
	}
}

// While the writes fail (Redis down), answers do not wait for their ids:
// RememberResponse hands out no channel, the id is still queued. Once a
// write succeeds again, they do.
func TestSharedNotWaitedWhileWritesFail39(t *testing.T) {
	// Long enough that the id queued while failing is not given up on
	// before the pause ends, however slow this goroutine is.
	_, rdb, e, l := shareEdge(t, time.Second)
	unpause := holdShareWriter(t, rdb, e, "resp_first", l)
	waitFor(t, "the held batch failed", func() bool { return e.d.shareResp.failed.Load() > 0 })
	if shared := e.d.RememberResponse("resp_while_failing", l); shared != nil {
		t.Fatal("a channel handed out while the writes fail")
	}
	unpause()
	waitRedisKey(t, rdb, "iop:resp:resp_while_failing")
	waitFor(t, "a write succeeded", func() bool { return !e.d.shareResp.failing.Load() })
	shared := e.d.RememberResponse("resp_after", l)
	if shared == nil {
		t.Fatal("no channel once the writes succeed again")
	}
	testwait.Recv(t, shared, waitDeadline, "the write after the outage")
}

// Ids learnt once the writer stopped (answers that ended after the
// edge's drain, with the dispatcher closed) are counted unshared as
// "stopped", and no answer waits for them. Before, they were queued for a
// writer that was gone: never written, never counted.
func TestIDsAfterTheWriterStoppedCounted39(t *testing.T) {
	_, _, e, l := shareEdge(t, time.Second)
	e.d.Close()
	if shared := e.d.RememberResponse("resp_late", l); shared != nil {
		t.Fatal("a channel for an id no writer will write")
	}
	if n := counterValue(t, e, "iop_response_ids_unshared_total", "reason", "stopped"); n != 1 {
		t.Fatalf("iop_response_ids_unshared_total{reason=\"stopped\"} %v, want 1", n)
	}
}

// Ids still queued when the writer stops (behind a batch Redis did not
// answer at Close) are counted "stopped", and their waiters released.
func TestIDsQueuedAtTheWritersEndCounted39(t *testing.T) {
	// The held batch fails at Close, not before: the ids behind it must
	// still be queued then.
	_, rdb, e, l := shareEdge(t, 3*time.Second)
	holdShareWriter(t, rdb, e, "resp_0", l)
	const queued = 9
	var waits []<-chan struct{}
	for i := 1; i <= queued; i++ {
		if w := e.d.RememberResponse("resp_"+strconv.Itoa(i), l); w != nil {
			waits = append(waits, w)
		}
	}
	e.d.Close()
	if n := counterValue(t, e, "iop_response_ids_unshared_total", "reason", "stopped"); n != queued {
		t.Errorf("stopped %v, want the %d ids queued behind the failed batch", n, queued)
	}
	if n := counterValue(t, e, "iop_response_ids_unshared_total", "reason", "write_failed"); n != 1 {
		t.Errorf("write_failed %v, want 1 (resp_0's batch)", n)
	}
	for _, w := range waits {
		testwait.Recv(t, w, waitDeadline, "a queued id's waiter released at the writer's end")
	}
}
