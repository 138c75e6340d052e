package cli

import "syscall"

// parentDeathAttr has the kernel SIGKILL the CLI when the node dies without
// stopping it (SIGKILL, the OOM killer). Linux sends the signal when the
// thread that started the child ends, not the process: runProcess starts
// the CLI from a goroutine locked to its thread until the CLI is reaped,
// because Go ends a thread when a goroutine locked to it returns, and any
// goroutine of the node could otherwise be the one to do so on the thread
// that once started a CLI still running. The CLI's descendants do not
// inherit the signal: the group guard (guard_linux.go) stops them.
func parentDeathAttr(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
