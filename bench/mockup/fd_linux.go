//go:build linux

package mockup

import (
	"net"
	"syscall"
	"unsafe"
)

// rawFD is conn's socket, for non-blocking writes from the pacer. The
// pacer writes to it only while it owns the stream, and the connection is
// closed only after the stream has ended, so the descriptor cannot be
// reused under it.
func rawFD(conn net.Conn) (int, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil || fd < 0 {
		return 0, false
	}
	return fd, true
}

// writeFD writes b without blocking (Go's sockets are non-blocking) and
// returns how much the socket took; a full socket is not an error.
//
// It is a raw system call: it cannot block, and telling the scheduler
// about it (syscall.Write) costs more than the call itself at thousands of
// writes per second: with GOMAXPROCS 1, sysmon keeps retaking the P from
// the pacer during writes and the pacer hops between threads.
func writeFD(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, nil
		}
		return 0, errno
	}
}

// yieldCPU lets another task on this CPU run (sched_yield): the pacer
// never blocks while it is behind, and the client reading the streams may
// share the CPU.
func yieldCPU() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
