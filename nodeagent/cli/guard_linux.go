package cli

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
)

// A CLI's process group outlives a node that dies without stopping it
// (SIGKILL, the OOM killer): the CLI itself gets its parent-death signal
// (groupAttr), but that signal is not inherited, and the shells, tools and
// servers it started run on. A guard stops them: the node binary
// re-executed (guardArg0), a member of the CLI's group, that waits for the
// end of a pipe only the node holds and then kills the whole group.
//
// Why a process and not the node as PR_SET_CHILD_SUBREAPER: a subreaper
// only adopts the orphans of its dead descendants; when the subreaper
// itself dies they go to init and keep running. Why not a PID namespace
// (whose members the kernel kills with its first process): it needs
// CAP_SYS_ADMIN or an unprivileged user namespace, which many hosts and
// container runtimes refuse. The guard needs neither. Being in the group,
// it keeps the group id from being reused while it waits, so its kill
// cannot reach another group. A process that leaves the group (setsid,
// setpgid) escapes it, as it escapes the node's own stop.

// guardArg0 is the guard's argv[0]; its only argument is the group id.
const guardArg0 = "iop-node-cli-guard"

// guardFD is the guard's end of the pipe: its first extra file.
const guardFD = 3

// guardEntry is set by RunGuardIfAsked: the running binary answers a
// guard's invocation, so startGuard may re-execute it as one. A binary
// that never called it (a test binary of another package) would run its
// own main with the guard's arguments instead: it gets no guard.
var guardEntry atomic.Bool

// RunGuardIfAsked runs this process as a CLI group's guard, and exits,
// when it was started as one (argv[0] guardArg0 and one argument, the
// group id); otherwise it returns at once. A binary that starts CLIs
// (iop-node's main, this package's TestMain) calls it first thing, before
// it parses flags or starts anything: a guard must do nothing else.
func RunGuardIfAsked() {
	if len(os.Args) == 2 && os.Args[0] == guardArg0 {
		os.Exit(runGuard(os.Args[1]))
	}
	guardEntry.Store(true)
}

// runGuard waits until every writer of the pipe at guardFD is gone (the
// node died, or stopped the guard) and kills process group pgid, itself
// included. It returns at once, killing nothing, on a bad argument, when
// it is not a member of group pgid or when guardFD is not a pipe.
func runGuard(arg string) int {
	pgid, err := strconv.Atoi(arg)
	if err != nil || pgid <= 1 {
		return 2
	}
	// Only a member of the group acts on it (a member keeps its id from
	// naming another group), and only on the end of its pipe: started
	// any other way (by hand, by a binary that lost track of its guard),
	// it kills nothing.
	if syscall.Getpgrp() != pgid {
		return 2
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(guardFD, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return 2
	}
	// The node's stop sends SIGTERM to the group, the guard included:
	// it stays until the group is killed, by the node or by itself.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	f := os.NewFile(guardFD, "guard")
	var b [64]byte
	for {
		// The node never writes: only EOF (or a read error) ends this.
		if _, err := f.Read(b[:]); err != nil {
			break
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return 1
}

// guardDisabled makes startGuard start none; set only by tests, which
// check the CLI's own parent-death signal without the guard.
var guardDisabled bool

// groupGuard is a started guard, held by the run whose group it guards.
type groupGuard struct {
	cmd *exec.Cmd
	w   *os.File // the node's end of the pipe; the guard acts once it closes
}

// startGuard starts a guard for the process group pgid, led by a CLI the
// caller has started and not yet reaped (so the group exists).
func startGuard(pgid int) (*groupGuard, error) {
	if guardDisabled {
		return nil, nil
	}
	if !guardEntry.Load() {
		return nil, errNoGuardEntry
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errGuardPipe, err)
	}
	cmd := &exec.Cmd{
		// The running binary itself, even if replaced on disk since.
		Path: "/proc/self/exe",
		Args: []string{guardArg0, strconv.Itoa(pgid)},
		// Nothing of the node's environment (its keys) and no output
		// pipe of the CLI: the guard must not keep the run's output
		// open.
		Env:         []string{},
		Dir:         "/",
		ExtraFiles:  []*os.File{r},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pgid: pgid},
	}
	err = cmd.Start()
	// The guard holds its own copy; the node keeps only the write end.
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("%w: %w", errGuardStart, err)
	}
	return &groupGuard{cmd: cmd, w: w}, nil
}

// stop kills the guard (usually already killed by the run's sweep of the
// group) and reaps it; nil is a no-op. The run calls it once its CLI has
// exited, before reaping it, so that no guard outlives its run.
func (g *groupGuard) stop() {
	if g == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	g.w.Close()
}
