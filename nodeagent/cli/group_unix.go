//go:build unix

package cli

import (
	"os"
	"syscall"
)

// groupAttr starts the CLI as the leader of a new process group, so that the
// whole tree it spawns (shells, language servers, tool processes) can be
// signalled at once, and, where the system has one, with a parent-death
// signal (parentDeathAttr).
func groupAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	parentDeathAttr(a)
	return a
}

// signalGroup sends sig to every process in the group led by p.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
