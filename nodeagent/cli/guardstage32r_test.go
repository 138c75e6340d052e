//go:build linux

package cli

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// withNoFile runs f with the soft limit of open descriptors at soft (no
// new descriptor numbered soft or above), then restores it.
func withNoFile(t *testing.T, soft uint64, f func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = soft
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// startGuard's failures carry their stage (errGuardPipe, errGuardStart)
// and the system's errno, the cause noteUnguarded warns of once: a pipe
// out of descriptors, and a guard whose start runs out of them after its
// pipe was made.
func TestGuardFailureCarriesItsStage(t *testing.T) {
	prev := guardEntry.Swap(true)
	t.Cleanup(func() { guardEntry.Store(prev) })
	pgid := syscall.Getpgrp()

	var err error
	withNoFile(t, 0, func() { _, err = startGuard(pgid) })
	if !errors.Is(err, errGuardPipe) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("pipe out of descriptors: %v, want errGuardPipe with EMFILE", err)
	}

	// Fill every free descriptor below those in use (descriptors are
	// given lowest first), so that the pipe takes exactly the two numbers
	// the limit leaves and the guard's start finds none.
	ents, err2 := os.ReadDir("/proc/self/fd")
	if err2 != nil {
		t.Skipf("no /proc/self/fd: %v", err2)
	}
	maxUsed := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > maxUsed {
			maxUsed = n
		}
	}
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		if int(f.Fd()) > maxUsed {
			f.Close()
			break
		}
		held = append(held, f)
	}
	withNoFile(t, uint64(maxUsed)+3, func() { _, err = startGuard(pgid) })
	if !errors.Is(err, errGuardStart) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("start out of descriptors: %v, want errGuardStart with EMFILE", err)
	}
}
