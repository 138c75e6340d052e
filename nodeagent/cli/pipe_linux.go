package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeCapacity returns how many bytes the pipe f can hold (a CLI may have
// grown it with F_SETPIPE_SZ), or defaultPipeCapacity if that is unknown.
func pipeCapacity(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return defaultPipeCapacity
	}
	n := -1
	if err := rc.Control(func(fd uintptr) {
		n, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	}); err != nil || n <= 0 {
		return defaultPipeCapacity
	}
	return n
}
