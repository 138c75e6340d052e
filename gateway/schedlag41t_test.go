package gateway_test

import (
	"sync"
	"testing"
	"time"
)

// schedLag measures how long this process was kept from running: a
// goroutine asks to be woken every schedLagTick and adds up how much
// longer than schedLagGrace each gap between its wakes lasted. A timer the
// edge armed fires late by about as much when the machine stalls the
// process, so a test bounding how soon the edge acts can add what was
// lost over the interval it measures: on an idle machine that is 0 and
// the bound stays strict; on a starved one the edge is not blamed for time
// nothing in the process ran.
type schedLag struct {
	mu   sync.Mutex
	last time.Time     // the meter's last wake
	lost time.Duration // stalls up to last
}

const schedLagTick = 10 * time.Millisecond

// schedLagGrace is the part of each gap not counted: what a busy machine
// adds to every wake, which the edge's few wakes from its timer to the
// client's read also see and the caller's own slack covers. Counting it
// too would add up the meter's hundred wakes a second, not the stalls.
const schedLagGrace = 50 * time.Millisecond

// startSchedLag starts the meter; it stops when t ends.
func startSchedLag(t *testing.T) *schedLag {
	t.Helper()
	s := &schedLag{last: time.Now()}
	stop, done := make(chan struct{}), make(chan struct{})
	tk := time.NewTicker(schedLagTick)
	go func() { // Owner: t; stopped by its cleanup.
		defer close(done)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				// Not the tick's own time, when the timer fired: the wake
				// is what a starved process delays.
				now := time.Now()
				s.mu.Lock()
				s.lost += stalled(now.Sub(s.last))
				s.last = now
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	return s
}

// stalled is how much of a gap between two wakes was a stall.
func stalled(gap time.Duration) time.Duration {
	return max(0, gap-schedLagGrace)
}

// Lost is the stall time so far, the meter's own wake still pending
// included: a stall that has just ended counts before the meter has run
// again (the test may well run first). The difference of two readings
// bounds the stalls between them.
func (s *schedLag) Lost() time.Duration {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost + stalled(now.Sub(s.last))
}
