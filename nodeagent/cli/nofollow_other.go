//go:build !unix

package cli

// Without O_NOFOLLOW the open follows a symlink swapped in after the
// Lstat; the SameFile check after it still refuses it.
const oNoFollow = 0

func isNoFollowRefusal(error) bool { return false }
