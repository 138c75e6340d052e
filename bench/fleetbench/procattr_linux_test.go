package fleetbench

import "syscall"

// nginxProcAttr puts the reference nginx in its own process group (so its
// workers stop with it) and kills its master if the benchmark dies.
func nginxProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
