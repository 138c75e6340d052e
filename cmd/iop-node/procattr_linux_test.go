//go:build linux

package main

import "syscall"

// gatewayProcAttr is set on every iop-node the tests start: the process
// is killed when the test process dies, even by SIGKILL or a -timeout
// panic that runs no cleanup, instead of running on, orphaned.
//
// Linux sends the parent-death signal when the thread that started the
// child ends, not the process. Go ends an OS thread only when a goroutine
// locked to it (runtime.LockOSThread) exits still locked; nothing these
// tests run locks one, so the starting thread lives as long as the test
// process and the signal comes when that process dies.
func gatewayProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
