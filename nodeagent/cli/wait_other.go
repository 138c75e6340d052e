//go:build !linux

package cli

import "errors"

// waitExited is Linux-only (waitid with WNOWAIT). Elsewhere the group is not
// swept after the leader exits: once it is reaped, its group id could name
// an unrelated process group.
func waitExited(int) error { return errors.ErrUnsupported }

// reapGroup is not needed where the group is never swept.
func reapGroup(int) {}
