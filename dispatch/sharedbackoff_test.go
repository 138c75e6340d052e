package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"
)

// After a take that Redis did not answer, fresh requests fail at once with
// cluster_unavailable for ledgerBackoff instead of each waiting out the
// ledger's timeout (a second here): a burst of requests during an outage
// is answered promptly, not after a second each.
func TestClusterFreshTakeBacksOffAfterFailure(t *testing.T) {
	f, _, p := lostReplyCluster(t)
	ctx := context.Background()
	p.drop.Store(true)
	if _, err := f.d.Acquire(ctx, Request{Model: "m", NoWait: true}); !errors.Is(err, ErrClusterUnavailable) {
		t.Fatalf("acquire with Redis not answering: %v, want %v", err, ErrClusterUnavailable)
	}
	failed := time.Now()
	_, err := f.d.Acquire(ctx, Request{Model: "m", NoWait: true})
	took := time.Since(failed)
	if !errors.Is(err, ErrClusterUnavailable) {
		t.Fatalf("acquire right after the failure: %v, want %v", err, ErrClusterUnavailable)
	}
	// A take that goes to Redis waits its whole timeout (a second) for
	// the dropped answer; one refused by the backoff does not wait.
	if took >= time.Second {
		t.Fatalf("acquire right after the failure took %s: it waited for Redis instead of failing at once", took)
	}
}
