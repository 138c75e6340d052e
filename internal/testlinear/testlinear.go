// Package testlinear helps tests that hold a parser's work linear in its
// input by timing it at n and at a multiple of n.
//
// Such a test compares two durations on a shared machine, so it takes
// the shortest of a few runs of each (Fastest), and it skips itself under
// the race detector (SkipUnderRace), whose instrumentation, and the
// shadow memory it allocates as the heap grows, swamps what is timed:
// linear code measured 19–29× for 8× the input there. `make test` runs
// the tests named IsLinear once without -race.
package testlinear

import (
	"testing"
	"time"
)

// Fastest is the shortest of three runs of f: the least noisy figure on a
// shared machine.
func Fastest(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}

// SkipUnderRace skips t when the binary was built with -race.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("timed without the race detector (see internal/testlinear)")
	}
}
