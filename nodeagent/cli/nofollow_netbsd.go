package cli

import "syscall"

// noFollowErrno is NetBSD's answer to an O_NOFOLLOW open of a symlink
// (open(2): "EFTYPE: O_NOFOLLOW was specified, but the last path
// component is a symlink"), where the others say ELOOP or EMLINK.
const noFollowErrno = syscall.EFTYPE
