//go:build !linux

package cli

// protectNode has no portable equivalent of Linux's PR_SET_DUMPABLE.
func protectNode() error { return nil }
