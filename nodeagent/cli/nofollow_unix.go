//go:build unix

package cli

import (
	"errors"
	"syscall"
)

// oNoFollow makes an open refuse a symlink as the name's last component.
const oNoFollow = syscall.O_NOFOLLOW

// isNoFollowRefusal reports whether err is an open refused by oNoFollow:
// ELOOP on Linux, macOS and OpenBSD, EMLINK on FreeBSD and DragonFly,
// EFTYPE on NetBSD (noFollowErrno).
func isNoFollowRefusal(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK) || errors.Is(err, noFollowErrno)
}
