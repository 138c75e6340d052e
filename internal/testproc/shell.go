package testproc

import (
	"os/exec"
	"runtime"
	"testing"
)

// Shell returns the POSIX sh a test runs its scripts with, or skips the
// test where there is none: on Windows (whose sh, if a PATH has one, is no
// POSIX shell with the signals, ulimit and process groups these scripts
// use) and wherever sh is not on PATH. Every test that runs sh calls it
// first, so that such a test builds and skips on any system rather than
// failing.
func Shell(t testing.TB) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("runs a POSIX sh script: none on Windows")
	}
	path, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("runs a POSIX sh script: %v", err)
	}
	return path
}
