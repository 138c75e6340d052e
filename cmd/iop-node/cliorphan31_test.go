//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testproc"
)

// A node killed by SIGKILL (or the OOM killer) runs no stop: its CLI
// dies by its parent-death signal, and what the CLI started (here a
// grandchild in its process group) by the group's guard.
func TestCLIAndItsChildrenDieWithAKilledNode(t *testing.T) {
	testproc.Shell(t)
	dir := t.TempDir()
	// The grandchild's pid is written before the CLI's: once the CLI's
	// is there, both are.
	cliPID, childPID := filepath.Join(dir, "cli.pid"), filepath.Join(dir, "child.pid")
	s := startCLINode(t, []string{"sh", "-c", `sleep 600 & echo $! > "$1"; echo $$ > "$0"; exec sleep 600`, cliPID, childPID},
		nil, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\n")
	answered := s.askAgent()
	readPID := func(name string) int {
		b, err := os.ReadFile(name)
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	stack.WaitFor(t, 20*time.Second, "the CLI to start", func() bool { return readPID(cliPID) > 0 })
	pids := map[string]int{"the CLI": readPID(cliPID), "the CLI's child": readPID(childPID)}
	starts := map[string]string{}
	for what, pid := range pids {
		start, ok := testproc.Started(pid)
		if !ok {
			t.Fatalf("%s (pid %d) is not running\n%s", what, pid, s.out.String())
		}
		starts[what] = start
		// Whatever happens, neither outlives the test.
		t.Cleanup(func() {
			if st, ok := testproc.Started(pid); ok && st == start {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}

	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.killedBy(t, syscall.SIGKILL)
	for what, pid := range pids {
		testproc.WaitGone(t, what+" of a node killed by SIGKILL", pid, starts[what], 10*time.Second)
	}
	select {
	case <-answered:
	case <-time.After(20 * time.Second):
		t.Fatal("the run's answer never ended")
	}
}
