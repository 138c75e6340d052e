package cli

import (
	"fmt"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A cause is its stage and its errno together: the same errno at two
// stages (a pipe and a start both out of memory) is two causes.
func TestUnguardedCauseIsStageAndErrno(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	a := &instance{log: zap.New(core)}
	a.noteUnguarded(fmt.Errorf("%w: %w", errGuardPipe, syscall.ENOMEM))
	a.noteUnguarded(guardStartFailure(syscall.ENOMEM))
	if w := logs.FilterLevelExact(zapcore.WarnLevel).Len(); w != 2 {
		t.Fatalf("%d warnings, want one per stage", w)
	}
}

// Runs note their guard failures concurrently: the causes seen are
// guarded (run under -race), and each is still warned of once.
func TestUnguardedNotedConcurrently(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	a := &instance{log: zap.New(core)}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { // Owner: this test; ends after one note.
			defer wg.Done()
			a.noteUnguarded(guardStartFailure(syscall.Errno(1 + i%2)))
		}()
	}
	wg.Wait()
	if w := logs.FilterLevelExact(zapcore.WarnLevel).Len(); w != 2 {
		t.Fatalf("%d warnings for two causes noted by eight runs, want 2", w)
	}
}
