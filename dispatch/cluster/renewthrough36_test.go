package cluster

import (
	"context"
	"testing"
	"time"
)

// renewThrough renews lease of key on l every tenth of ttl (l's TTL)
// until two TTLs have passed since from, as the cluster loop does (every
// TTL/3) but more often, so that a loaded machine's stall rarely reaches
// the TTL (renewals every TTL/3 of 400 ms let the lease expire between
// two of them at load 20). A renewal that finds the lease gone fails the
// test, unless the one before it returned more than half a TTL earlier:
// then the machine stalled, and the test is skipped as unable to judge.
func renewThrough(t *testing.T, l *Ledger, key string, lease HeldLease, ttl time.Duration, from time.Time) {
	t.Helper()
	last := from
	for time.Since(from) < 2*ttl {
		time.Sleep(ttl / 10)
		missing, err := l.Renew(context.Background(), map[string][]HeldLease{key: {lease}})
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) != 0 {
			if gap := time.Since(last); gap > ttl/2 {
				t.Skipf("a renewal came %v after the one before (TTL %v): the machine stalled, the lease expired between them", gap, ttl)
			}
			t.Fatalf("renewal %v after the take: the lease is gone (%v)", time.Since(from), missing)
		}
		last = time.Now()
	}
}
