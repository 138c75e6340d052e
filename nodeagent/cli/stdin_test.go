//go:build unix

package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A CLI that exits without reading its prompt while a process that left
// its group (setsid) holds stdin open: the prompt's copy into the pipe can
// never end, and the run must not wait for it. It ends after the wait
// delay, with the CLI's answer: the CLI itself succeeded.
func TestRunEndsWhenEscapedProcessHoldsUnreadStdin(t *testing.T) {
	r := newRig(t)
	sh, pidFile := escapedStdinHolder(t, "echo done\n")
	inst := r.instance(t, []string{sh}, nil)
	// More than any pipe holds: the copy blocks for good.
	prompt := strings.Repeat("p", 4<<20)
	s := newChanSink()
	done := runAsync(context.Background(), inst, userRun(t, prompt), s)
	readPID(t, pidFile)
	start := time.Now()
	o := await(t, done)
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	if took := time.Since(start); took > minWaitDelay+5*time.Second {
		t.Errorf("run ended %s after the CLI was released", took)
	}
	if got := s.rest(); got != "done\n" {
		t.Errorf("answer %q, want %q", got, "done\n")
	}
}
