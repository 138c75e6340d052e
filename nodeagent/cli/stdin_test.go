//go:build unix

package cli

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A CLI that exits without reading its prompt while a process that left
// its group (setsid) holds stdin open: the prompt's copy into the pipe can
// never end, and the run must not wait for it. It ends after the wait
// delay, with the CLI's answer: the CLI itself succeeded.
func TestRunEndsWhenEscapedProcessHoldsUnreadStdin(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid binary")
	}
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	sh := script(t, `exec 3<&0
`+sq(setsid)+` sh -c 'echo $$ > "$1"; exec sleep 60' sh `+sq(pidFile)+` <&3 &
while [ ! -s `+sq(pidFile)+` ]; do sleep 0.01; done
echo done
`)
	inst := r.instance(t, []string{sh}, nil)
	// More than any pipe holds: the copy blocks for good.
	prompt := strings.Repeat("p", 4<<20)
	s := newChanSink()
	done := runAsync(context.Background(), inst, userRun(t, prompt), s)
	pid := readPID(t, pidFile)
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	start := time.Now()
	o := await(t, done)
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	if took := time.Since(start); took > minWaitDelay+5*time.Second {
		t.Errorf("run ended %s after the CLI was released", took)
	}
	if got := s.rest(); got != "done\n" {
		t.Errorf("answer %q, want %q", got, "done\n")
	}
}
