//go:build unix

package cli

import (
	"context"
	"testing"
)

// A session whose run never started the CLI (it was cancelled first) left
// nothing behind: no state and no process. It is not listed as live.
func TestSessionsOmitsSessionThatNeverRan(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, "cat\n")}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := userRun(t, "x")
	req.SessionId = "never-ran"
	if _, err := inst.Run(ctx, req, newChanSink()); err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	if got := inst.Sessions(); len(got) != 0 {
		t.Fatalf("Sessions() = %+v, want none", got)
	}
}
