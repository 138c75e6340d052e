//go:build !linux

package testproc

import (
	"testing"
	"time"
)

// DiesWithParent skips the test: without a parent-death signal, a command
// started by a test process that is killed runs on until stopped by hand.
func DiesWithParent(t *testing.T, starter, what string, startWait time.Duration, env func() []string) {
	t.Helper()
	t.Skip("the parent-death signal is Linux's")
}
