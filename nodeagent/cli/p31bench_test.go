//go:build unix

package cli

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkRunProcessTrue is the cost of one CLI process run around the
// CLI itself (true: it exits at once): pipes, start, waits, the group's
// sweep and, on Linux, its guard.
func BenchmarkRunProcessTrue(b *testing.B) {
	spec := trueSpec(b)
	for b.Loop() {
		if _, err := runProcess(context.Background(), spec, failingSink{}); err != nil {
			b.Fatal(err)
		}
	}
}

// trueSpec runs true (it exits at once), skipping the test without it.
func trueSpec(t testing.TB) *procSpec {
	path, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true binary")
	}
	return &procSpec{path: path, argv: []string{"true"}, dir: t.TempDir(), env: []string{}, timeout: time.Minute, killGrace: time.Second, maxStderr: 1024}
}
