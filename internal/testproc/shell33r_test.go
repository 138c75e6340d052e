//go:build !windows

package testproc

import (
	"os/exec"
	"testing"
)

// Where sh is on PATH (and this is no Windows), Shell goes on: a test that
// calls it runs rather than passing as skipped. Checked in a subtest, since
// a Shell that skipped wrongly would otherwise skip this test too, which
// go test reports as a pass.
func TestShellGoesOnWhereShIs(t *testing.T) {
	want, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this PATH")
	}
	var got string
	skipped := true
	t.Run("sh", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		got = Shell(t)
	})
	if skipped || got != want {
		t.Fatalf("Shell: skipped %v, returned %q; want %q and no skip", skipped, got, want)
	}
}
