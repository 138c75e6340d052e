//go:build linux || darwin || freebsd || netbsd || openbsd

package h1client

import "syscall"

// peekAlive asks the kernel, without blocking and without consuming
// anything, whether the socket has been closed by the peer or has
// unexpected bytes waiting: the read side must be empty and open
// (EAGAIN). One system call per reuse.
func peekAlive(raw syscall.RawConn) bool {
	var buf [1]byte
	alive := false
	err := raw.Read(func(fd uintptr) bool {
		// err == nil means bytes (n > 0) or the peer's FIN (n == 0):
		// either way the connection cannot take a request.
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // never wait for readiness
	})
	return err == nil && alive
}
