//go:build linux

package cli

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// nofollowWatchOpens watches path for being opened (inotify IN_OPEN) and
// returns a func that reports whether it was since.
func nofollowWatchOpens(t *testing.T, path string) (opened func() bool) {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN); err != nil {
		t.Skipf("no inotify watch on %s: %v", path, err)
	}
	return func() bool {
		var buf [4096]byte
		n, err := syscall.Read(fd, buf[:])
		if errors.Is(err, syscall.EAGAIN) {
			return false // nothing queued: the watch is non-blocking
		}
		if err != nil {
			t.Fatalf("read inotify: %v", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&syscall.IN_OPEN != 0 {
				return true
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
		return false
	}
}

// A symlink swapped in for the state file after the look at it is refused
// by the open itself: the file it points to, out of the store, is never
// opened (a device or a FIFO there would see an open; a FIFO with a
// writer blocked in opening it would be let go).
func TestStateSymlinkSwappedInIsNeverFollowed(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte(`{"id":"linked","runs":9}`), stateFilePerm); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{outside, fifo} {
		t.Run(filepath.Base(target), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			name := revcfgSwapState(t, dir, "linked")
			opened := nofollowWatchOpens(t, target)
			revcfgSwapAfterLstat(t, func(n string) {
				if n != name {
					return
				}
				if err := os.Remove(n); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(target, n); err != nil {
					t.Error(err)
				}
			})
			_, err := readState(dir, "linked")
			if !errors.Is(err, errStateNotRegular) {
				t.Fatalf("readState: %v, want errStateNotRegular", err)
			}
			// inotify queues the event before open(2) returns.
			if opened() {
				t.Fatalf("the symlink's target %s was opened", target)
			}
			// The watch does see an open (of the kind readStateBytes makes).
			f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			if !opened() {
				t.Fatal("inotify reported no open of the target opened here")
			}
		})
	}
}
