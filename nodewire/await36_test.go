package nodewire

import (
	"sync"
	"testing"
	"time"
)

// await receives from ch, and fails the test naming what if nothing
// comes within waitLong: a regression that never sends (or never closes
// ch) fails the test that waited, not go test's whole run at its
// timeout.
func await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLong):
		t.Fatalf("timed out after %v waiting for %s", waitLong, what)
		var zero T
		return zero
	}
}

// awaitGroup waits for wg, and fails the test naming what if it has not
// finished within waitLong (a goroutine of the test blocked by a
// regression, a write that never gets credit).
func awaitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	// Owner: the test. Stops when wg's goroutines have ended (after the
	// test failed, when the cleanup's Close ends them).
	go func() { wg.Wait(); close(done) }()
	await(t, done, what)
}
