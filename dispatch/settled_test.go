package dispatch

import "testing"

// A node that drops its session as soon as the edge closes a finished
// exchange (a draining node stops then) can be fenced before the holder's
// Release runs. The lease still returns with the holder's reason, not
// node_lost: the work was done and its answer delivered.
func TestFenceAfterFinishedExchangeKeepsHoldersReason(t *testing.T) {
	l := finishCompleteRunFenced(t, ReasonCompleted)
	if _, reason := l.Released(); reason != ReasonCompleted {
		t.Fatalf("a finished exchange's lease returned as %q by the fence, want %q", reason, ReasonCompleted)
	}
}
