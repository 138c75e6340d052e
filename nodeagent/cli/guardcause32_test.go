package cli

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// guardStartFailure is startGuard's error when the guard cannot be
// started: exec.Cmd.Start's *fs.PathError under errGuardStart.
func guardStartFailure(errno syscall.Errno) error {
	return fmt.Errorf("%w: %w", errGuardStart, &fs.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: errno})
}

// Each distinct cause of a run without its guard is warned of once per
// adapter (a later, different failure is not hidden by the first); a
// repeat is logged at debug, and the causes warned of are bounded.
func TestUnguardedWarnedOncePerCause(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	a := &instance{log: zap.New(core)}
	levels := func() (warn, debug int) {
		return logs.FilterLevelExact(zapcore.WarnLevel).Len(), logs.FilterLevelExact(zapcore.DebugLevel).Len()
	}
	for i, c := range []struct {
		err         error
		warn, debug int // totals after it
	}{
		{nil, 0, 0},
		{errNoGuardEntry, 1, 0},
		{errNoGuardEntry, 1, 1},
		{guardStartFailure(syscall.EAGAIN), 2, 1},
		{guardStartFailure(syscall.EAGAIN), 2, 2},
		{guardStartFailure(syscall.ENOMEM), 3, 2},
		{fmt.Errorf("%w: %w", errGuardPipe, syscall.EMFILE), 4, 2},
		{fmt.Errorf("%w: %w", errGuardPipe, syscall.EMFILE), 4, 3},
	} {
		a.noteUnguarded(c.err)
		if w, d := levels(); w != c.warn || d != c.debug {
			t.Fatalf("after %d (%v): %d warnings, %d debug entries; want %d, %d", i, c.err, w, d, c.warn, c.debug)
		}
	}
	if got := logs.FilterLevelExact(zapcore.WarnLevel).All()[3].ContextMap()["error"]; got != "cli: guard pipe: too many open files" {
		t.Fatalf("warning's error %q", got)
	}
	// Past maxUnguardedCauses distinct causes, new ones go to debug.
	for errno := syscall.Errno(1); errno <= maxUnguardedCauses; errno++ {
		a.noteUnguarded(guardStartFailure(errno + 1000))
	}
	if w, _ := levels(); w != maxUnguardedCauses {
		t.Fatalf("%d warnings for many causes, want the bound %d", w, maxUnguardedCauses)
	}
}
