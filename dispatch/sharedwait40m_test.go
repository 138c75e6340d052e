// Mutants of the thirty-ninth pass's changes that no test kills, and why:
//
//   - write: dropping "batch[i] = shareItem{}" after closing each done
//     channel. Equivalent: the slot is overwritten by the next batch; the
//     clearing only lets the collector have the channels sooner.
//   - AwaitShared: dropping "defer t.Stop()". Equivalent: since Go 1.23
//     an unreferenced timer is collected whether stopped or not.
//   - applyEnvDocs: dropping "!ok ||". Equivalent: an unset variable
//     reads as "", which the blank test skips as well.
//   - bindEnvs: dropping "ft.Kind() == reflect.Map" from the documents'
//     case. Unreachable today: the only maps (headers, the provider's
//     remaining keys) are inside lists, which bindEnvs does not enter.
//   - relay, an answer past the hold: scanID(held, true) for
//     scanID(held, false). Equivalent: held is over 16 MiB, past the
//     scan's 4 KiB bound, so the scan settles on it whatever last says.
//   - scanID: dropping its "id == \"\"" return. Equivalent:
//     RememberResponse returns nil for an empty id too.
//   - edgeapp.MaxStop without cluster.CloseWait. Not tested: it is a sum
//     of bounds each tested where it is applied; a test reaching all of
//     them would take the 14 s it names.
//
// Killed outside the packages the sweep ran: Edge.Close with a drain of
// 0 for ShutdownDrain (only renamed in this range) fails internal/stack's
// TestShutdownDrainReturnsSlotsToTheLedger (the request in flight at
// shutdown is cut instead of answered).

package dispatch

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
	"github.com/iop-gateway/iop/internal/testwait"
)

// An id's shared channel stays open while the write carrying that very
// id is held by Redis, and AwaitShared returns as soon as that write
// ends, not at the ledger's timeout: an answer waits one round trip, not
// the bound. (TestSharedClosesOnceTheIDIsInRedis39 holds the batch ahead
// of the id, so a channel closed as its own batch starts, before the
// write, went unnoticed.)
func TestAwaitSharedEndsWithItsOwnWrite40m(t *testing.T) {
	// Far past waitDeadline: an AwaitShared that only ends at the
	// ledger's timeout fails the wait below.
	_, rdb, e, l := shareEdge(t, 30*time.Second)
	unpause := pauseShareWrites(t, rdb)
	shared := e.d.RememberResponse("resp_own", l)
	if shared == nil {
		t.Fatal("no channel")
	}
	waitSetPaused(t, rdb) // resp_own's own write, held
	select {
	case <-shared:
		t.Fatal("shared closed while the write carrying its id was held")
	default:
	}
	returned := make(chan struct{})
	// Owner: this test; ends once the write ends (the unpause below).
	go func() {
		defer close(returned)
		e.d.AwaitShared(context.Background(), shared)
	}()
	unpause()
	testwait.Recv(t, returned, waitDeadline, "AwaitShared once the id's write ended")
	if rdb.Exists(context.Background(), "iop:resp:resp_own").Val() != 1 {
		t.Fatal("AwaitShared returned before the id was in Redis")
	}
}

// AwaitShared's bound is the ledger's timeout (Config.Timeout), not a
// longer duration of the ledger such as its lease TTL (3 s here).
func TestAwaitSharedBoundIsTheLedgersTimeout40m(t *testing.T) {
	const timeout = 200 * time.Millisecond
	_, rdb, e, l := shareEdge(t, timeout)
	if got := e.d.ledger.Timeout(); got != timeout {
		t.Fatalf("Ledger.Timeout() %v, want the configured %v", got, timeout)
	}
	holdShareWriter(t, rdb, e, "resp_first", l)
	shared := e.d.RememberResponse("resp_second", l)
	if shared == nil {
		t.Fatal("no channel")
	}
	start := time.Now()
	e.d.AwaitShared(context.Background(), shared)
	if took := time.Since(start); took < timeout || took > 2*time.Second {
		t.Fatalf("AwaitShared returned after %v with the write held, want about the ledger's timeout %v", took, timeout)
	}
}

// An id the full queue turns away gets no channel: nothing will ever
// close one for it, and its answer would wait out the ledger's timeout.
func TestSharedNilWhenTheQueueIsFull40m(t *testing.T) {
	_, rdb, e, l := shareEdge(t, 20*time.Second)
	holdShareWriter(t, rdb, e, "resp_0", l) // the writer holds resp_0's batch
	for i := 1; i <= responseShareQueue; i++ {
		if e.d.RememberResponse("resp_"+strconv.Itoa(i), l) == nil {
			t.Fatalf("resp_%d, queued, got no channel", i)
		}
	}
	if shared := e.d.RememberResponse("resp_over", l); shared != nil {
		t.Fatal("an id dropped by the full queue got a channel")
	}
	if d := e.d.shareResp.dropped.Load(); d != 1 {
		t.Fatalf("%d ids dropped, want resp_over alone", d)
	}
}

// A single id still queued when the writer stops is counted "stopped"
// too (the count is of the ids drained, from the first).
func TestOneIDQueuedAtTheWritersEndCounted40m(t *testing.T) {
	// The held batch fails at Close, not before: the id behind it must
	// still be queued then.
	_, rdb, e, l := shareEdge(t, 3*time.Second)
	holdShareWriter(t, rdb, e, "resp_0", l)
	w := e.d.RememberResponse("resp_1", l)
	if w == nil {
		t.Fatal("no channel")
	}
	e.d.Close()
	testwait.Recv(t, w, waitDeadline, "the queued id's waiter released at the writer's end")
	if n := counterValue(t, e, "iop_response_ids_unshared_total", "reason", "stopped"); n != 1 {
		t.Fatalf("stopped %v, want 1: resp_1, queued behind the failed batch", n)
	}
}

// Every reason of iop_response_ids_unshared_total exists at zero from the
// start, "stopped" included, so that its first loss shows in increase().
func TestUnsharedReasonsExistAtZero40m(t *testing.T) {
	f := newFixture(t, twoProviderCfg(t), nil)
	for _, r := range []string{"queue_full", "write_failed", "stopped"} {
		if v := counterValue(t, f, "iop_response_ids_unshared_total", "reason", r); v != 0 {
			t.Errorf("iop_response_ids_unshared_total{reason=%q} %v at start, want 0", r, v)
		}
	}
}

// Ids remembered while the dispatcher closes are each either written to
// Redis or counted unshared, and every channel handed out closes: none is
// queued behind the writer's end, where nothing would write it, count it
// or release its answer. RememberResponse looks at the writer's stopped
// flag and queues under one hold of mu, which shareStopped takes to set
// the flag before its drain. Several rounds of writers racing Close.
func TestRememberDuringCloseNeverStrandsAnID40m(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	for round := range 10 {
		e := clusterEdge(t, rs, "e"+strconv.Itoa(round), 5*time.Second)
		l := mustAcquire(t, e.d, Request{Model: "only-p2"})
		closed := make(chan struct{})
		const workers = 6
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			waits []<-chan struct{}
			total atomic.Int64
		)
		for w := range workers {
			wg.Add(1)
			// Owner: this test; ends once Close has returned (the
			// writer stopped within it).
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-closed:
						return
					default:
					}
					ch := e.d.RememberResponse("r"+strconv.Itoa(round)+"_"+strconv.Itoa(w)+"_"+strconv.Itoa(i), l)
					total.Add(1)
					if ch != nil {
						mu.Lock()
						waits = append(waits, ch)
						mu.Unlock()
						// As an answer does: the next id comes once this
						// one's write ended, so the queue is rarely full.
						e.d.AwaitShared(context.Background(), ch)
					}
				}
			}()
		}
		waitFor(t, "ids remembered before Close", func() bool { return total.Load() >= 200 })
		e.d.Close()
		close(closed)
		wg.Wait()
		for _, w := range waits {
			testwait.Recv(t, w, waitDeadline, "every channel handed out closed")
		}
		written := int64(len(rdb.Keys(context.Background(), "iop:resp:r"+strconv.Itoa(round)+"_*").Val()))
		var unshared float64
		for _, r := range []string{"queue_full", "write_failed", "stopped"} {
			unshared += counterValue(t, e, "iop_response_ids_unshared_total", "reason", r)
		}
		// At least: a batch that failed is counted whole though some of
		// it may have landed.
		if written+int64(unshared) < total.Load() {
			t.Fatalf("round %d: %d ids remembered, only %d in Redis and %v counted unshared", round, total.Load(), written, unshared)
		}
		l.Release(ReasonCompleted)
	}
}
