package cli

import (
	"errors"

	"golang.org/x/sys/unix"
)

// waitExited blocks until process pid has exited, without reaping it. While
// the exited leader is an unreaped zombie its pid, and so its process group
// id, cannot be reused, which makes signalling the group afterwards safe.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
