//go:build unix && !linux

package fleetbench

import "syscall"

// nginxProcAttr puts the reference nginx in its own process group, so its
// workers stop with it (no parent-death signal outside Linux).
func nginxProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
