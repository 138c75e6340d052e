//go:build linux

package testproc

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// A running process is Started; once exited (a zombie not yet reaped)
// it is not, nor once reaped.
func TestStartedTellsAZombieFromARunningProcess(t *testing.T) {
	c := exec.Command(Shell(t), "-c", "read x")
	w, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	if _, ok := Started(pid); !ok {
		t.Fatal("a running process is not Started")
	}
	_ = w.Close() // read sees EOF: sh exits
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := Started(pid); ok {
		t.Fatal("a zombie is Started")
	}
	_ = c.Wait()
	if _, ok := Started(pid); ok {
		t.Fatal("a reaped process is Started")
	}
}
