//go:build !unix

package cli

import (
	"os"
	"syscall"
)

// Without process groups only the CLI process itself can be stopped; its
// children may outlive it.
func groupAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, _ syscall.Signal) error { return p.Kill() }
