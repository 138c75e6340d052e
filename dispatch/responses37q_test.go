package dispatch

import (
	"context"
	"errors"
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
	e.d.learnResponse(rctx, "resp_gone")
	e.d.mu.Lock()
	down = time.Now().Before(e.d.ledgerDownUntil)
	e.d.mu.Unlock()
	if down {
		t.Error("a lookup ended by the request's context marked the ledger down")
	}
}
