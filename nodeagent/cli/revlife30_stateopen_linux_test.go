package cli

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// A state name that is a FIFO (or a device) from the start is refused on
// the look at it, without an open: an open, even a non-blocking one, lets
// go a writer blocked in opening the FIFO, and a device's open may act.
func TestStateNotRegularAtRestIsNeverOpened(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	name := revcfgSwapState(t, dir, "fifo")
	if err := syscall.Unlink(name); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(name, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := nofollowWatchOpens(t, name)
	if _, err := readState(dir, "fifo"); !errors.Is(err, errStateNotRegular) {
		t.Fatalf("readState: %v, want errStateNotRegular", err)
	}
	// inotify queues the event before open(2) returns.
	if opened() {
		t.Fatal("the FIFO in the state file's place was opened")
	}
	// The watch does see an open (of the kind readStateBytes makes).
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Close(fd)
	if !opened() {
		t.Fatal("inotify reported no open of the FIFO opened here")
	}
}

// A state file removed between the look at it and its opening is no state
// (fs.ErrNotExist: its directory is then a stateless one, removed at
// load), not a state file refused as replaced by a symlink.
func TestStateRemovedWhileOpenedIsNoState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	name := revcfgSwapState(t, dir, "gone")
	revcfgSwapAfterLstat(t, func(n string) {
		if n == name {
			if err := syscall.Unlink(n); err != nil {
				t.Error(err)
			}
		}
	})
	_, err := readState(dir, "gone")
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, errStateNotRegular) {
		t.Fatalf("readState: %v, want fs.ErrNotExist", err)
	}
}
