// Package testwait holds the bounded waits the tests of several packages
// share. Each wait has a deadline that does not depend on the code under
// test, and one that runs out fails the test naming what it waited for:
// a regression that never sends, never finishes or never gets there
// fails the test that waited, with a line that says what hung, instead
// of go test's whole run at its timeout with a dump of every goroutine.
//
// The deadlines are the callers': each package keeps its own generous
// figure for a loaded 2-core box under the race detector.
package testwait

import (
	"sync"
	"time"
)

// TB is what the waits need of a test: testing.TB has it, and so has a
// package's narrower interface over *testing.T and *testing.B.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Recv receives from ch (a value, or the zero value once ch is closed)
// and fails t if nothing comes within d. A zero or negative d fails at
// once unless a value is ready.
func Recv[T any](t TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", d, what)
		var zero T
		return zero
	}
}

// Group waits for wg and fails t if it has not finished within d. The
// goroutine that waits on wg ends when wg does, so a test that failed
// here leaks nothing once its cleanup has ended wg's goroutines.
func Group(t TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	// Owner: the test. Stops when wg's goroutines have ended (after the
	// test failed, when its cleanup ends them).
	go func() { wg.Wait(); close(done) }()
	Recv(t, done, d, what)
}

// defaultPoll is Until's pause for a zero or negative poll.
const defaultPoll = time.Millisecond

// Until calls cond every poll until it holds, and fails t if it does not
// within d. cond is called at least once; a zero or negative poll is
// taken as defaultPoll (never a busy loop).
func Until(t TB, d, poll time.Duration, what string, cond func() bool) {
	t.Helper()
	if poll <= 0 {
		poll = defaultPoll
	}
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
			return
		}
		time.Sleep(poll)
	}
}
