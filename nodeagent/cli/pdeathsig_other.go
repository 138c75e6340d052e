//go:build unix && !linux

package cli

import "syscall"

// parentDeathAttr: no parent-death signal is set here; a CLI outlives a
// node that dies without stopping it.
func parentDeathAttr(*syscall.SysProcAttr) {}
