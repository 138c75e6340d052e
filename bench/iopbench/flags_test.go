//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the command itself when the flag tests start this test
// binary with iopbenchMain set. Otherwise it runs the tests and fails the
// package's run when one leaves a goroutine behind (a load's stream, a
// proxy's connection), so the next test does not inherit it.
func TestMain(m *testing.M) {
	if os.Getenv(iopbenchMain) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const iopbenchMain = "IOPBENCH_TEST_MAIN"

// runMain runs the command with args and returns its exit code and stderr.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), iopbenchMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("run: %v", err)
	return 0, ""
}

// A misspelt phase or path is a usage error before anything starts: it
// would otherwise measure nothing and still write a report.
func TestUnknownPhaseOrPathRefused(t *testing.T) {
	// -root names no module: a run that went on would fail there (exit 1).
	root := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-phases", "latncy"}, `unknown phase "latncy"`},
		{[]string{"-phases", "latency,"}, `unknown phase ""`},
		{[]string{"-paths", "tunel"}, `unknown path "tunel"`},
	} {
		code, stderr := runMain(t, append([]string{"-build=false", "-nice", "0", "-root", root}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %s", c.args, code, stderr, c.want)
		}
	}
}
