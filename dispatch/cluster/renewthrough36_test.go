package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// renewThrough renews lease of key on l every tenth of ttl (l's TTL)
// until two TTLs have passed since from, as the cluster loop does (every
// TTL/3) but more often, so that a loaded machine's stall rarely reaches
// the TTL (renewals every TTL/3 of 400 ms let the lease expire between
// two of them at load 20). from is when the lease's take began (before
// the Take call). A renewal that finds the lease gone fails the test,
// unless the machine stalled a whole TTL (renewalsThrough): then the test
// is skipped as unable to judge.
func renewThrough(t *testing.T, l *Ledger, key string, lease HeldLease, ttl time.Duration, from time.Time) {
	t.Helper()
	renew := func() (map[string][]string, error) {
		return l.Renew(context.Background(), map[string][]HeldLease{key: {lease}})
	}
	err := renewalsThrough(renew, time.Now, time.Sleep, ttl, from)
	if errors.Is(err, errStalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// errStalled is renewalsThrough's verdict when the lease was found gone
// but the machine stalled long enough for it to expire legitimately.
var errStalled = errors.New("the machine stalled a TTL between two renewals")

// renewalsThrough calls renew every tenth of ttl until two TTLs have
// passed since from (when the lease's take began). When a renewal finds
// the lease gone, it tells a lease that expired on a correct ledger from
// one that should not have. renew.lua keeps a lease alive while Redis's
// TIME at a renewal is below the one at the renewal (or take) before it
// plus the TTL; each ran between its call's start and its return, so on a
// correct ledger the lease is gone only if this renewal returned a TTL or
// more after the one before began (errStalled, the machine stalled: not
// judged). Sooner, the ledger let it expire: an error. (A bound counted
// from the previous renewal's return instead, at half a TTL, skipped
// expiries half a TTL to a TTL after it, and failed on a correct ledger
// when the previous renewal's own return was held back.)
func renewalsThrough(renew func() (map[string][]string, error), now func() time.Time, sleep func(time.Duration), ttl time.Duration, from time.Time) error {
	prev := from // when the previous renewal (or the take) began
	for now().Sub(from) < 2*ttl {
		sleep(ttl / 10)
		began := now()
		missing, err := renew()
		if err != nil {
			return fmt.Errorf("renewal %v after the take: %w", began.Sub(from), err)
		}
		if len(missing) != 0 {
			// Redis's TIME in whole ms, its clock not the runtime's: a
			// twentieth of the TTL's margin.
			if gap := now().Sub(prev); gap >= ttl-ttl/20 {
				return fmt.Errorf("%w: a renewal returned %v after the one before began (TTL %v), the lease expired between them", errStalled, gap, ttl)
			}
			return fmt.Errorf("renewal %v after the take, %v after the one before began (TTL %v): the lease is gone (%v)", now().Sub(from), now().Sub(prev), ttl, missing)
		}
		prev = began
	}
	return nil
}
