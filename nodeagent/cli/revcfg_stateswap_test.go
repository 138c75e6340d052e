//go:build unix

package cli

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"
	"time"
)

// revcfgSwapState writes a state file for sid in dir and returns its path.
func revcfgSwapState(t *testing.T, dir, sid string) string {
	t.Helper()
	if err := writeState(dir, &sessionState{ID: sid, Runs: 1}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, stateFileName)
}

// revcfgSwapAfterLstat makes swap run between readStateBytes' Lstat and
// its open, for the rest of the test.
func revcfgSwapAfterLstat(t *testing.T, swap func(name string)) {
	t.Helper()
	stateLstatHook = swap
	t.Cleanup(func() { stateLstatHook = nil })
}

// A state file replaced between the look at it and its opening is
// refused, not read: by a FIFO (whose opening must not block, whoever
// opens it for writing or not), by a symlink to a state file outside the
// store, or by another regular file (whose content was not the file
// looked at).
func TestStateFileReplacedWhileOpenedIsRefused(t *testing.T) {
	outside := t.TempDir()
	outState := revcfgSwapState(t, filepath.Join(outside, "s"), "linked")
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, name string)
	}{
		{"fifo", func(t *testing.T, name string) {
			if err := os.Remove(name); err != nil {
				t.Error(err)
			}
			if err := syscall.Mkfifo(name, 0o600); err != nil {
				t.Error(err)
			}
		}},
		{"symlink", func(t *testing.T, name string) {
			if err := os.Remove(name); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(outState, name); err != nil {
				t.Error(err)
			}
		}},
		{"regular", func(t *testing.T, name string) {
			other := name + ".other"
			if err := os.WriteFile(other, []byte(`{"id":"linked","runs":9}`), stateFilePerm); err != nil {
				t.Error(err)
			}
			if err := os.Rename(other, name); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			name := revcfgSwapState(t, dir, "linked")
			revcfgSwapAfterLstat(t, func(n string) {
				if n == name {
					tc.swap(t, n)
				}
			})
			type result struct {
				st  sessionState
				err error
			}
			done := make(chan result, 1)
			// Owner: this test. Ends when readState returns; a read
			// blocked in opening the FIFO is let go by the releases
			// below.
			go func() {
				st, err := readState(dir, "linked")
				done <- result{st, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(waitLong):
				stop := make(chan struct{})
				// Owner: this test. Ends once readState has returned.
				go func() { r = <-done; close(stop) }()
				statefifoReleaseUntil(stop, name)
				t.Fatalf("readState did not return within %v (blocked opening the FIFO put in its place?)", waitLong)
			}
			if !errors.Is(r.err, errStateNotRegular) {
				t.Fatalf("readState = %+v, %v; want errStateNotRegular", r.st, r.err)
			}
		})
	}
}

// readStateBytes closes what it opens, whether it reads the state or
// refuses it: a store read at every run must not leak a descriptor each
// time.
func TestReadStateClosesTheFile(t *testing.T) {
	dir := t.TempDir()
	ok := revcfgSwapState(t, filepath.Join(dir, "ok"), "ok")
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxStateBytes+1), stateFilePerm); err != nil {
		t.Fatal(err)
	}
	fds := func() int {
		es, err := os.ReadDir("/dev/fd")
		if err != nil {
			t.Skipf("no /dev/fd: %v", err)
		}
		return len(es)
	}
	// No collection meanwhile: an os.File's finalizer would close what
	// was leaked.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const reads = 100
	before := fds()
	for i := 0; i < reads; i++ {
		if _, err := readStateBytes(ok); err != nil {
			t.Fatal(err)
		}
		if _, err := readStateBytes(big); !errors.Is(err, errStateTooLarge) {
			t.Fatalf("err = %v, want errStateTooLarge", err)
		}
	}
	// Other goroutines of the process may open a few meanwhile; a leak
	// holds one per read.
	if after := fds(); after-before >= reads {
		t.Fatalf("%d descriptors open after %d reads, %d before: the state file is not closed", after, 2*reads, before)
	}
}

// A state.json that is a symlink is refused as one whatever it points
// to: one pointing nowhere is no missing state (which would make the
// directory a leftover to remove, or a session counted against no
// bound), and its target is never opened.
func TestDanglingStateSymlinkIsNoMissingState(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(t.TempDir(), "gone"), filepath.Join(dir, stateFileName)); err != nil {
		t.Fatal(err)
	}
	_, err := readState(dir, "x")
	if !errors.Is(err, errStateNotRegular) || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v; want errStateNotRegular, not a missing file", err)
	}
}
