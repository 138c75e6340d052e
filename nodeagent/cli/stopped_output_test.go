//go:build unix

package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// countSink counts what it is given and fails from its failAt-th delta on
// (0: never).
type countSink struct {
	mu     sync.Mutex
	calls  int
	bytes  int
	failAt int
}

var errSinkGone = errors.New("sink gone")

func (s *countSink) Delta(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.bytes += len(text)
	if s.failAt > 0 && s.calls >= s.failAt {
		return errSinkGone
	}
	return nil
}

func (s *countSink) counts() (calls, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.bytes
}

// Once the sink failed, the run is stopping: output the CLI still prints
// during the kill grace (it ignores SIGTERM here) is not sent to the sink.
func TestRunSendsNothingAfterSinkFailed(t *testing.T) {
	r := newRig(t)
	sh := script(t, "trap '' TERM\nexec yes tick\n")
	inst := r.instance(t, []string{sh}, map[string]string{SettingKillGraceMS: "300"})
	sink := &countSink{failAt: 1}
	o := await(t, runAsync(context.Background(), inst, userRun(t, "x"), sink))
	if !errors.Is(o.err, errSinkGone) {
		t.Fatalf("Run: %v, want the sink's error", o.err)
	}
	if calls, _ := sink.counts(); calls != 1 {
		t.Fatalf("sink called %d times, want 1 (nothing after its failure)", calls)
	}
}

// A process that left the CLI's group and writes to the inherited stdout
// only after the CLI exited gets no more relayed than the pipe can hold
// plus a read in flight on either side: the drain's bound, not one chunk
// past it.
func TestRunDrainBoundIsExact(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid binary")
	}
	// The bound the run uses: the pipe's capacity (a fresh pipe's, as
	// the CLI's is: nothing here grows it) and two reads.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	bound := pipeCapacity(pr) + 2*stdoutReadSize
	pr.Close()
	pw.Close()

	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The escaped writer floods stdout once the CLI is gone (reaped: kill
	// -0 fails), so all it writes falls under the drain's bound.
	sh := script(t, sq(setsid)+` sh -c 'echo $$ > "$1"; while kill -0 "$2" 2>/dev/null; do sleep 0.01; done; exec yes tick' sh `+sq(pidFile)+` $$ &
while [ ! -s `+sq(pidFile)+` ]; do sleep 0.01; done
echo done
`)
	inst := r.instance(t, []string{sh}, nil)
	sink := &countSink{}
	done := runAsync(context.Background(), inst, userRun(t, "x"), sink)
	pid := readPID(t, pidFile)
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	o := await(t, done)
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	_, n := sink.counts()
	if want := len("done\n") + bound; n > want {
		t.Fatalf("relayed %d bytes, want at most %d (the CLI's %q and the drain bound)", n, want, strings.TrimSpace("done\n"))
	}
	if n <= len("done\n") {
		t.Fatalf("relayed %d bytes: the escaped writer's output never came, so the bound was not tried", n)
	}
	eventually(t, "escaped writer gone (SIGPIPE)", func() bool { return processGone(pid) })
}
