package nodewire

import (
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
