//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package h1client

import "syscall"

// peekAlive cannot probe without blocking here; a connection the upstream
// closed while idle then fails its next request, which is retried by the
// rules in (*retryable).ok.
func peekAlive(syscall.RawConn) bool { return true }
