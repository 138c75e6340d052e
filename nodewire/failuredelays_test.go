package nodewire

import (
	"testing"
	"time"
)

// Failed-credential delays double per failure up to failureMaxDelay, and
// a key that has not failed for failureMemory starts again from the first
// delay: a node that mistyped its token once long ago is not answered as
// slowly as a guesser.
func TestFailureDelaysGrowAndAreForgottenAfterMemory(t *testing.T) {
	f := newFailureDelays()
	k := newFailureKey("n1", "192.0.2.1")
	var got []time.Duration
	for range 7 {
		got = append(got, f.fail(k))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	// The last failure lies further back than failureMemory.
	f.mu.Lock()
	f.byKey[k].Value.(*failureEntry).last = time.Now().Add(-failureMemory - time.Second)
	f.mu.Unlock()
	if d := f.fail(k); d != failureBaseDelay {
		t.Fatalf("delay after %v without failures: %v, want %v", failureMemory, d, failureBaseDelay)
	}
	// Another source's failures are its own.
	if d := f.fail(newFailureKey("n1", "192.0.2.2")); d != failureBaseDelay {
		t.Fatalf("another source's first failure: %v, want %v", d, failureBaseDelay)
	}
}
