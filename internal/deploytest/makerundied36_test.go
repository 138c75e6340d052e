package deploytest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeRunDeadEdge stands in for an iop-edge that cannot start: it says
// so on its stderr (makeRunDeadEdgeSays), which must reach make's output
// although the recipe's own stderr is /dev/null while the edge starts,
// and exits 3 at once (a code neither make's own 2 nor a signal's).
const makeRunDeadEdge = "#!/bin/bash\necho '" + makeRunDeadEdgeSays + "' >&2\nexit 3\n"

const makeRunDeadEdgeSays = `{"level":"error","msg":"cannot start"}`

// runMakeWithDeadEdge runs `make run` with the edge dying at once and the
// node the fake of installFake (released up front: it exits on its first
// signal), the recipe's line at replaced by inject; it returns make's
// output and its exit.
func runMakeWithDeadEdge(t *testing.T, at, inject string) (log string, err error) {
	t.Helper()
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	makefile, err := os.ReadFile(path("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(makefile), at) != 1 {
		t.Fatalf("the run recipe has no single %q", at)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	writeFile(t, filepath.Join(bin, "iop-edge"), makeRunDeadEdge)
	if err := os.Chmod(filepath.Join(bin, "iop-edge"), 0o755); err != nil {
		t.Fatal(err)
	}
	installFake(t, filepath.Join(bin, "iop-node"))
	writeFile(t, filepath.Join(dir, "Makefile"), strings.Replace(string(makefile), at, inject, 1))
	writeFile(t, filepath.Join(dir, "release"), "")
	mk, done, waitErr := startMakeRun(t, dir, bin, "FAKE_DIR="+dir)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
		<-done
	}
	killUnder(bin)
	out, err := os.ReadFile(filepath.Join(dir, "make.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(out), *waitErr
}

// failedWith reports whether make run failed for the edge's exit 3: make
// exits 2 for any failed recipe, and names the recipe's status; the
// edge's own line is in the output.
func failedWith(err error, log string) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && exit.ExitCode() == 2 &&
		strings.Contains(log, "iop: a process stopped (exit 3)") && strings.Contains(log, "Error 3") &&
		strings.Contains(log, makeRunDeadEdgeSays)
}

// A signal that comes while make run tears down after the edge died
// (here the recipe's shell signals itself just then) does not hide the
// failure: make run still exits with the edge's status. It used to take
// the signal for the reason of the stop and exit 0.
func TestMakeRunSignalDuringTeardownKeepsTheStatus(t *testing.T) {
	for _, sig := range []string{"INT", "TERM", "HUP"} {
		t.Run(sig, func(t *testing.T) {
			log, err := runMakeWithDeadEdge(t, "\tuntil wait; do :; done; \\\n", "\tkill -"+sig+" $$$$; until wait; do :; done; \\\n")
			if !failedWith(err, log) {
				t.Errorf("make run after the edge's exit 3 and a SIG%s in the teardown: %v, want the exit 3 reported\n%s", sig, err, log)
			}
		})
	}
}

// jobLine is a line bash's job control prints for a job that ended
// ("[1]- Exit 3 bin/iop-edge …", "[2]+ Done …"); make's own "make[1]:"
// (make run started by another make, as under make test) is not one.
var jobLine = regexp.MustCompile(`(?m)^\[\d+\][-+ ]`)

// An edge that stops while the recipe still has job control on (here
// held on until bash has reaped it and run a command after) prints no
// job line ("[1]- Exit 3 …"), and its status is not lost: bash drops
// such a job from its table once it printed the line, and `wait -n` then
// waited on the node instead (until the fake gave up, exit 0).
func TestMakeRunEdgeDeadUnderJobControl(t *testing.T) {
	log, err := runMakeWithDeadEdge(t, "\tset +m; \\\n",
		"\tuntil ! kill -0 $$edge 2>/dev/null; do sleep 0.01; done; true; set +m; \\\n")
	if !failedWith(err, log) {
		t.Errorf("make run with the edge dead under job control: %v, want the exit 3 reported\n%s", err, log)
	}
	if jobLine.MatchString(log) {
		t.Errorf("a job-control line in make run's output:\n%s", log)
	}
}
