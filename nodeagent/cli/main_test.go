package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// Every run must leave no goroutine behind: readers, waiters and timers all
// end before Run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
