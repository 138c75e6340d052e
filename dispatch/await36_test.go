package dispatch

import "github.com/iop-gateway/iop/internal/testwait"

// await receives from ch, and fails the test naming what if nothing
// comes within waitDeadline: a regression that never sends (or never
// closes ch) fails the test that waited, not go test's whole run at its
// timeout.
func await[T any](t tb, ch <-chan T, what string) T {
	t.Helper()
	return testwait.Recv(t, ch, waitDeadline, what)
}
