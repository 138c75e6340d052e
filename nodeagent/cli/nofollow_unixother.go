//go:build unix && !netbsd

package cli

import "syscall"

// noFollowErrno: only NetBSD answers with an errno of its own; elsewhere
// it repeats ELOOP, already checked.
const noFollowErrno = syscall.ELOOP
