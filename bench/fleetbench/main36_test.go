package fleetbench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a test leaves a goroutine behind
// (a server, a connection's loop, a run's watcher), so the next test does
// not inherit it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
