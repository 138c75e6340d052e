//go:build unix

package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/iop-gateway/iop/internal/testproc"
)

// A CLI that exits 0 while the copy of its prompt cannot end (a process
// that left its group holds stdin unread) makes cmd.Wait answer
// ErrWaitDelay, which Go returns only after a successful exit: the run
// succeeds and its exit code is 0. Before, it was -1 ("not known"), the
// very outcome TestThreadsEndingKillNoCLI took for a killed CLI when a
// loaded machine kept the copy from running within the wait delay.
func TestWaitDelayKeepsExitCodeZero(t *testing.T) {
	spec := trueSpec(t)
	sh, _ := escapedStdinHolder(t, "")
	spec.path, spec.argv = testproc.Shell(t), []string{"sh", sh}
	// More than any pipe holds: the copy blocks for good.
	spec.stdin = strings.Repeat("p", 4<<20)
	out, err := runProcess(context.Background(), spec, failingSink{})
	if err != nil {
		t.Fatalf("runProcess: %v", err)
	}
	if out.exitCode != 0 {
		t.Fatalf("exit code %d, want 0", out.exitCode)
	}
}

// escapedStdinHolder writes a CLI script that starts a process leaving its
// group (setsid) with the script's stdin, never read, waits until that
// process is up (its pid in pidFile), then runs tail. The holder escapes
// the run's sweep: the test's cleanup kills it. It skips without a setsid
// binary.
func escapedStdinHolder(t *testing.T, tail string) (sh, pidFile string) {
	t.Helper()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid binary")
	}
	pidFile = filepath.Join(t.TempDir(), "pid")
	t.Cleanup(func() {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return // never started
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return script(t, `exec 3<&0
`+sq(setsid)+` sh -c 'echo $$ > "$1"; exec sleep 60' sh `+sq(pidFile)+` <&3 &
while [ ! -s `+sq(pidFile)+` ]; do sleep 0.01; done
`+tail), pidFile
}
