package testwait

import (
	"testing"
	"time"
)

// Until with a poll of zero pauses defaultPoll between calls rather than
// spinning: over 50 ms it calls cond at most once a millisecond (fewer on
// a loaded machine), where a loop without the pause calls it hundreds of
// thousands of times. The count, not the time taken, decides.
func TestUntilZeroPollDoesNotSpin38m(t *testing.T) {
	for _, poll := range []time.Duration{0, -time.Second} {
		calls := 0
		start := time.Now()
		Until(t, 10*time.Second, poll, "50 ms to pass", func() bool {
			calls++
			return time.Since(start) >= 50*time.Millisecond
		})
		if calls > 1000 {
			t.Errorf("poll %v: cond called %d times in 50 ms, want a pause between calls", poll, calls)
		}
	}
}
