package cli

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
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

// The guard runs before anything else of the binary: package
// initialisation is the only hook every binary that starts CLIs (iop-node,
// this package's tests) shares. Nothing else of the binary runs.
func init() {
	if len(os.Args) == 2 && os.Args[0] == guardArg0 {
		os.Exit(runGuard(os.Args[1]))
	}
}

// runGuard waits until every writer of the pipe at guardFD is gone (the
// node died, or stopped the guard) and kills process group pgid, itself
// included. It returns only on a bad argument.
func runGuard(arg string) int {
	pgid, err := strconv.Atoi(arg)
	if err != nil || pgid <= 1 {
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
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cli: guard pipe: %w", err)
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
		return nil, fmt.Errorf("cli: start group guard: %w", err)
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
