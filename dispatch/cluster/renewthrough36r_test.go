package cluster

import (
	"errors"
	"testing"
	"time"
)

// fakeRenewals drives renewalsThrough on a clock of its own: each renewal
// takes took[i] (its call's time, Redis's reply within it) and finds the
// lease gone from the renewal gone on.
type fakeRenewals struct {
	clock time.Time
	took  []time.Duration
	gone  int // the first renewal (from 0) that finds the lease gone; -1 none
	calls int
}

func (f *fakeRenewals) now() time.Time        { return f.clock }
func (f *fakeRenewals) sleep(d time.Duration) { f.clock = f.clock.Add(d) }
func (f *fakeRenewals) renew() (map[string][]string, error) {
	i := f.calls
	f.calls++
	if i < len(f.took) {
		f.clock = f.clock.Add(f.took[i])
	} else {
		f.clock = f.clock.Add(time.Millisecond)
	}
	if f.gone >= 0 && i >= f.gone {
		return map[string][]string{"k": {"lease"}}, nil
	}
	return nil, nil
}

func (f *fakeRenewals) run(ttl time.Duration) error {
	return renewalsThrough(f.renew, f.now, f.sleep, ttl, f.clock)
}

// renewalsThrough's verdict on a lease found gone is told by the time
// since the previous renewal began, against the whole TTL: an expiry
// sooner than a TTL is the ledger's fault whatever the machine did, and
// one a TTL or more after is not judged.
func TestRenewalsThroughJudgesTheGapFromTheRenewalBefore(t *testing.T) {
	const ttl = time.Second
	ms := time.Millisecond
	for _, c := range []struct {
		name    string
		took    []time.Duration
		gone    int
		stalled bool // want errStalled
		fails   bool // want another error
	}{
		{name: "renewed throughout", gone: -1},
		// The lease gone at the third renewal, 101 ms after the second
		// began: a ledger that let it expire (renew.lua without its ZADD).
		{name: "gone between timely renewals", gone: 2, fails: true},
		// The third renewal, which finds the lease gone, held 600 ms: it
		// returned 700 ms after the second returned (more than half a
		// TTL) but 701 ms after the second began, when the lease had a
		// TTL left from then.
		{name: "gone 700 ms after the one before", took: []time.Duration{ms, ms, 600 * ms}, gone: 2, fails: true},
		// The third renewal held 1.1 s: Redis may have run it a TTL past
		// the second, so the lease may have expired on a correct ledger.
		{name: "gone after a stall of a TTL", took: []time.Duration{ms, ms, 1100 * ms}, gone: 2, stalled: true},
		// The second renewal's return held back 900 ms, then the third
		// held 100 ms: 1.1 s after the second began, only 200 ms after
		// its return.
		{name: "gone a TTL after the one before began", took: []time.Duration{ms, 900 * ms, 100 * ms}, gone: 2, stalled: true},
		// The first renewal 1.2 s after the take began.
		{name: "gone at the first renewal after a stall", took: []time.Duration{1100 * ms}, gone: 0, stalled: true},
		{name: "gone at the first renewal", took: []time.Duration{5 * ms}, gone: 0, fails: true},
	} {
		f := &fakeRenewals{clock: time.Unix(1e9, 0), took: c.took, gone: c.gone}
		start := f.clock
		err := f.run(ttl)
		switch {
		case c.stalled && !errors.Is(err, errStalled):
			t.Errorf("%s: %v, want %v", c.name, err, errStalled)
		case c.fails && (err == nil || errors.Is(err, errStalled)):
			t.Errorf("%s: %v, want the lease's expiry judged an error", c.name, err)
		case !c.stalled && !c.fails && err != nil:
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.stalled && !c.fails {
			if took := f.clock.Sub(start); took < 2*ttl || f.calls < 15 {
				t.Errorf("%s: %d renewals over %v, want one every %v through %v", c.name, f.calls, took, ttl/10, 2*ttl)
			}
		}
	}
}

// A renewal's error ends the renewals with it.
func TestRenewalsThroughReturnsTheRenewalsError(t *testing.T) {
	f := &fakeRenewals{clock: time.Unix(1e9, 0), gone: -1}
	renew := func() (map[string][]string, error) { _, _ = f.renew(); return nil, ErrUnavailable }
	err := renewalsThrough(renew, f.now, f.sleep, time.Second, f.clock)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, errStalled) || f.calls != 1 {
		t.Fatalf("%v after %d renewals, want %v after one", err, f.calls, ErrUnavailable)
	}
}
