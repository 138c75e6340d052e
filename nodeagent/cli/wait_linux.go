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

// reapGroup reaps the members of an exited CLI's process group that have
// become the Node's own children, until none is left. They do when the Node
// is PID 1 (the iop-node image runs without an init) or a child subreaper:
// the CLI's descendants are reparented to the Node as their parents die,
// and those the sweep killed would stay zombies, each holding a pid until
// the Node exits. Otherwise they are init's and the first wait answers
// ECHILD.
//
// Call it only once the group has been swept and its leader reaped: every
// member is then dying, so the waits are short, and a member not yet
// reaped keeps the group id from naming another group.
func reapGroup(pgid int) {
	for {
		if _, err := unix.Wait4(-pgid, nil, 0, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
