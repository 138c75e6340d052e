package testproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Where sh is on PATH, Shell returns the sh exec finds (a test runs that
// one); where it is not, the test calling Shell is skipped, not failed,
// and goes no further.
func TestShellSkipsWithoutSh(t *testing.T) {
	if runtime.GOOS == "windows" {
		ran := false
		t.Run("windows", func(t *testing.T) { Shell(t); ran = true })
		if ran {
			t.Fatal("Shell did not skip on Windows")
		}
		return
	}
	want, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this PATH to compare with")
	}
	if got := Shell(t); got != want {
		t.Fatalf("Shell = %q, want %q", got, want)
	}
	if fi, err := os.Stat(want); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is no executable: %v", want, err)
	}

	t.Setenv("PATH", filepath.Join(t.TempDir(), "empty"))
	ran, skipped := false, false
	t.Run("no sh", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Shell(t)
		ran = true
	})
	if ran || !skipped {
		t.Fatalf("without sh on PATH: went on %v, skipped %v; want skipped", ran, skipped)
	}
}
