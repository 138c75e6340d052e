package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// asSubreaper makes the test process a child subreaper for the test's
// duration: the CLI's orphaned descendants become its children, as they
// become a Node's that runs as a container's PID 1.
func asSubreaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
}

// fullyGone reports whether pid no longer exists, not even as a zombie.
func fullyGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// A Node that is PID 1 (or a subreaper) inherits the CLI's descendants when
// the CLI exits; those the run kills must not stay behind as zombies, each
// holding a pid until the Node exits.
func TestRunLeavesNoZombieWhenNodeAdoptsOrphans(t *testing.T) {
	asSubreaper(t)
	for _, tc := range []struct {
		name   string
		script string
	}{
		// The CLI exits leaving a background grandchild; the sweep kills it.
		{"exit", "sleep 300 &\necho $! > PID\nsleep 300 | sleep 300 &\necho done\n"},
		// The CLI fails, with a grandchild whose own child is adopted only
		// once its parent dies.
		{"fail", "sh -c 'sleep 300 & wait' &\necho $! > PID\necho done\nexit 3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			inst := r.instance(t, []string{script(t, strings.ReplaceAll(tc.script, "PID", sq(pidFile)))}, nil)
			if _, err := runSync(t, inst, userRun(t, "x")); err != nil && tc.name == "exit" {
				t.Fatalf("Run: %v", err)
			}
			pid := readPID(t, pidFile)
			eventually(t, "grandchild reaped", func() bool { return fullyGone(pid) })
			eventually(t, "no child left", func() bool {
				var info unix.Siginfo
				err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
				return errors.Is(err, unix.ECHILD)
			})
		})
	}
}

// The same when the run is cancelled and its group stopped with signals.
func TestRunLeavesNoZombieWhenCancelled(t *testing.T) {
	asSubreaper(t)
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	inst := r.instance(t, []string{script(t, "sleep 300 &\necho $! > "+sq(pidFile)+"\necho ready\nwait\n")}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newChanSink()
	done := runAsync(ctx, inst, userRun(t, "x"), sink)
	if d := recvDelta(t, sink); d != "ready\n" {
		t.Fatalf("first delta = %q", d)
	}
	cancel()
	if o := await(t, done); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("Run error = %v, want cancelled", o.err)
	}
	pid := readPID(t, pidFile)
	eventually(t, "grandchild reaped", func() bool { return fullyGone(pid) })
}
