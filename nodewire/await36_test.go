package nodewire

import (
	"sync"
	"testing"

	"github.com/iop-gateway/iop/internal/testwait"
)

// await receives from ch, and fails the test naming what if nothing
// comes within waitLong: a regression that never sends (or never closes
// ch) fails the test that waited, not go test's whole run at its
// timeout.
func await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testwait.Recv(t, ch, waitLong, what)
}

// awaitGroup waits for wg, and fails the test naming what if it has not
// finished within waitLong (a goroutine of the test blocked by a
// regression, a write that never gets credit).
func awaitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	testwait.Group(t, wg, waitLong, what)
}
