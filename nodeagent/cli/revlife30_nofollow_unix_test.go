//go:build unix

package cli

import (
	"io/fs"
	"syscall"
	"testing"
)

// An open refused by O_NOFOLLOW is known by the errno each system gives
// it (ELOOP on Linux and macOS, EMLINK on FreeBSD), as the open returns
// it; other open errors (a name removed meanwhile, no permission) stay
// what they are, so a state file gone is still "no state".
func TestNoFollowRefusalErrnos(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		want  bool
	}{
		{syscall.ELOOP, true},
		{syscall.EMLINK, true},
		{syscall.ENOENT, false},
		{syscall.EACCES, false},
		{syscall.ENXIO, false},
	} {
		err := &fs.PathError{Op: "open", Path: "state.json", Err: tc.errno}
		if got := isNoFollowRefusal(err); got != tc.want {
			t.Errorf("isNoFollowRefusal(%v) = %v, want %v", err, got, tc.want)
		}
	}
	if isNoFollowRefusal(nil) {
		t.Error("isNoFollowRefusal(nil) = true")
	}
}
