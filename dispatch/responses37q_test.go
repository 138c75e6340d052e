package dispatch

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A follow-up's lookup that Redis does not answer is the evidence a failed
// take is: the grant after it fails at once (ErrClusterUnavailable), as
// every grant does for ledgerBackoff after a take found Redis silent.
// Before, the take went on to wait out the ledger's timeout a second time,
// so a follow-up got its 503 after twice timeout_ms (up to 20 s), where
// any other request got it after once.
func TestFollowUpLookupUnansweredFailsAtOnce37q(t *testing.T) {
	const timeout = 2 * time.Second
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", timeout)
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer rs.Stop() // not left to answer the dispatcher's last returns when the pause ends
	start := time.Now()
	err := acquireErr(e.d, Request{Model: "m", PreviousResponseID: "resp_1"})
	took := time.Since(start)
	if !errors.Is(err, ErrClusterUnavailable) {
		t.Errorf("a follow-up on a silent Redis: %v, want ErrClusterUnavailable", err)
	}
	// The lookup alone takes the timeout; a take after it would take as
	// long again (2 × timeout at least, whatever the machine's load).
	if took >= timeout*3/2 {
		t.Errorf("the follow-up's 503 took %v, want one ledger timeout (%v): the take waited on Redis after the lookup did", took, timeout)
	}
}

// Only Redis's silence marks the ledger down, never what a client can
// cause: a lookup that Redis refuses (a key of another type at the id the
// client named) or that ends with the request's own context leaves grants
// to go on, or one request would fail everyone's for ledgerBackoff.
func TestFollowUpLookupFailureOfTheRequestLeavesGrants37q(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", 20*time.Second)
	ctx := context.Background()
	rdb.LPush(ctx, "iop:resp:resp_list", "x")
	l := mustAcquire(t, e.d, Request{Model: "m", PreviousResponseID: "resp_list"})
	l.Release(ReasonCompleted)
	e.d.mu.Lock()
	down := time.Now().Before(e.d.ledgerDownUntil)
	e.d.mu.Unlock()
	if down {
		t.Error("a refused lookup marked the ledger down")
	}

	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "30000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer rs.Stop() // not left to answer the dispatcher's last returns when the pause ends
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	e.d.learnResponse(rctx, "m", "resp_gone")
	e.d.mu.Lock()
	down = time.Now().Before(e.d.ledgerDownUntil)
	e.d.mu.Unlock()
	if down {
		t.Error("a lookup ended by the request's context marked the ledger down")
	}
}

// Every id not shared is counted in iop_response_ids_unshared_total, by
// why: queue_full for each RememberResponse that found the queue full (a
// paused Redis holds the writer), write_failed for each id of a batch
// Redis did not take (out of memory). Once the queue is drained the two
// add up to every id remembered: none is lost uncounted.
func TestUnsharedResponseIDsCounted37q(t *testing.T) {
	rs, rdb, e, l := shareEdge(t, 20*time.Second)
	l.Release(ReasonCompleted)
	unshared := func(reason string) float64 {
		return counterValue(t, e, "iop_response_ids_unshared_total", "reason", reason)
	}
	if q, w := unshared("queue_full"), unshared("write_failed"); q != 0 || w != 0 {
		t.Fatalf("at start: queue_full %v, write_failed %v; want both series at 0", q, w)
	}
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	e.d.RememberResponse("resp_0", l)
	waitSetPaused(t, rdb) // resp_0's batch is held: the queue fills behind it
	const n = responseShareQueue + 100
	for i := 1; i < n; i++ {
		e.d.RememberResponse("resp_"+strconv.Itoa(i), l)
	}
	dropped := e.d.shareResp.dropped.Load()
	if q := unshared("queue_full"); dropped == 0 || q != float64(dropped) {
		t.Errorf("queue_full %v, want the %d ids the full queue refused", q, dropped)
	}
	// Out of memory: the batch held, once let go, is refused, and each
	// after it. (Refused rather than Redis stopped, whose failed dials
	// would leave go-redis's redial goroutine behind the test.)
	rs.OutOfMemory(t)
	if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every id counted", func() bool { return unshared("queue_full")+unshared("write_failed") == n })
	if q := unshared("queue_full"); q != float64(dropped) {
		t.Errorf("queue_full %v after the writes failed, want %d", q, dropped)
	}
}

// A follow-up of a model with one candidate is not looked up in Redis:
// whatever provider stored its previous response, the request can only
// go to that one candidate (cluster mode pins no waiter). A model with a
// choice is looked up once.
func TestFollowUpOfOneCandidateNotLookedUp37q(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	e := clusterEdge(t, rs, "e1", 2*time.Second)
	lookups := func() int {
		t.Helper()
		info, err := rdb.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		// cmdstat_getrange:calls=N,usec=…
		_, rest, ok := strings.Cut(info, "cmdstat_getrange:calls=")
		if !ok {
			return 0
		}
		n, _, _ := strings.Cut(rest, ",")
		calls, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("commandstats: %q", n)
		}
		return calls
	}
	before := lookups()
	l := mustAcquire(t, e.d, Request{Model: "only-p2", PreviousResponseID: "resp_elsewhere"})
	l.Release(ReasonCompleted)
	if got := lookups() - before; got != 0 {
		t.Errorf("a follow-up of a one-candidate model made %d lookups, want 0", got)
	}
	l = mustAcquire(t, e.d, Request{Model: "m", PreviousResponseID: "resp_elsewhere"})
	l.Release(ReasonCompleted)
	if got := lookups() - before; got != 1 {
		t.Errorf("a follow-up of a two-candidate model made %d lookups, want 1", got)
	}
}
