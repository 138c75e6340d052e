package deploytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeBuilt is testdata/makerunfake built once per test binary.
var fakeBuilt = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "makerunfake")
	if err != nil {
		return "", err
	}
	exe := filepath.Join(dir, "makerunfake")
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", exe, "./testdata/makerunfake").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build makerunfake: %w\n%s", err, out)
	}
	return exe, nil
})

// installFake puts testdata/makerunfake at path, the stand-in for
// iop-edge or iop-node (named by its file): once it listens for SIGINT
// and SIGTERM it notes its pid, then each of those signals (its name, one
// a line); after the first it notes "stopping", and exits once
// $FAKE_DIR/release exists (made by the recipe after its last signal, or
// by the test up front) or after 25 s.
func installFake(t *testing.T, path string) {
	t.Helper()
	exe, err := fakeBuilt()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// makeRunEarlyAt is where in the run recipe the shell signals itself, and
// what it waits for first: before "set -m" the binaries have not been
// started (one signalled before its traps are set dies of it, so only the
// stop is checked); just before "node=$!" both have started and set their
// traps, but the shell does not know the node's pid yet.
var makeRunEarlyAt = []struct {
	name, line, inject string
	once               bool
}{
	{"before set -m", "\tset -m; \\\n", "\tkill -%s $$$$; set -m; \\\n", false},
	{"before the node pid is known", " & node=$$!; \\\n",
		" & until [ -s $$FAKE_DIR/iop-edge.pid ] && [ -s $$FAKE_DIR/iop-node.pid ]; do sleep 0.01; done; kill -%s $$$$; node=$$!; \\\n", true},
	// Not early: the same signal twice once both run, which each binary
	// must get once for SIGTERM and SIGHUP (a repeat is make passing its
	// own on) and twice for SIGINT (a second Ctrl-C means "now"). The
	// fakes are released by a SIGWINCH trap (bash runs pending traps in
	// signal order, so it runs after the trap of the second copy), once
	// the fakes have noted four signals, or after 1.5 s for SIGTERM and
	// SIGHUP (whose right count is two, so the wait is the window in
	// which a wrongly passed-on repeat is seen) and 20 s for SIGINT
	// (whose right count is four: a 1.5 s cap released a node that had
	// not yet run the trap of its second SIGINT in a CI run, and it
	// exited without noting it). Released at once, a fake that saw the
	// release before running the trap of a signal already pending could
	// exit without noting it (once in a CI run at load 12).
	{"twice after both started", "\tset +m; \\\n",
		"\tset +m; until [ -s $$FAKE_DIR/iop-edge.pid ] && [ -s $$FAKE_DIR/iop-node.pid ]; do sleep 0.01; done; kill -%[1]s $$$$; until [ -e $$FAKE_DIR/iop-edge.stopping ] && [ -e $$FAKE_DIR/iop-node.stopping ]; do sleep 0.01; done; kill -%[1]s $$$$; " +
			"trap 'max=30; [ %[1]s = INT ] && max=400; for ((i=0; i<max; i++)); do n=0; for f in edge node; do mapfile -t l < $$FAKE_DIR/iop-$$f.sig; n=$$((n+$${#l[@]})); done; [ $$n -ge 4 ] && break; sleep 0.05; done; : > $$FAKE_DIR/release' WINCH; kill -WINCH $$$$; \\\n", true},
}

// A stop signal that reaches the recipe's shell after its traps are set
// but before both binaries have started (here sent by the shell to itself
// at the two ends of that window) must still stop both, once each, and
// make run must exit naming it. The trap used to kill "$edge $node" while
// they were still empty: the signal was lost, the binaries ran on, and a
// further SIGTERM (make's own, a supervisor's) was ignored as a repeat, so
// make run never stopped.
func TestMakeRunSignalBeforeBothStarted(t *testing.T) {
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	makefile, err := os.ReadFile(path("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []string{"INT", "TERM", "HUP"} {
		for _, at := range makeRunEarlyAt {
			t.Run(sig+" "+at.name, func(t *testing.T) {
				if strings.Count(string(makefile), at.line) != 1 {
					t.Fatalf("the run recipe has no single %q to signal at", at.line)
				}
				dir := t.TempDir()
				bin := filepath.Join(dir, "bin")
				for _, name := range []string{"iop-edge", "iop-node"} {
					installFake(t, filepath.Join(bin, name))
				}
				writeFile(t, filepath.Join(dir, "Makefile"), strings.Replace(string(makefile), at.line, fmt.Sprintf(at.inject, sig), 1))

				if !strings.HasPrefix(at.name, "twice") {
					writeFile(t, filepath.Join(dir, "release"), "")
				}
				mk, done, waitErr := startMakeRun(t, dir, bin, "FAKE_DIR="+dir)
				killAll := func() {
					_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
					for _, name := range []string{"iop-edge", "iop-node"} {
						if b, err := os.ReadFile(filepath.Join(dir, name+".pid")); err == nil {
							if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
								_ = syscall.Kill(pid, syscall.SIGKILL)
							}
						}
					}
				}
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					killAll()
					<-done
					log, _ := os.ReadFile(filepath.Join(dir, "make.log"))
					t.Fatalf("make run still running 30s after a SIG%s at start-up (the signal lost?):\n%s", sig, log)
				}
				t.Cleanup(killAll)
				if *waitErr != nil && !cleanStop(*waitErr, syscall.SIGINT) && !cleanStop(*waitErr, syscall.SIGTERM) && !cleanStop(*waitErr, syscall.SIGHUP) {
					t.Errorf("make run after a SIG%s at start-up: %v, want a clean stop", sig, *waitErr)
				}
				log, err := os.ReadFile(filepath.Join(dir, "make.log"))
				if err != nil {
					t.Fatal(err)
				}
				if want := "iop: stopped on SIG" + sig; !strings.Contains(string(log), want) {
					t.Errorf("make run's output lacks %q:\n%s", want, log)
				}
				want := "TERM\n"
				if sig == "INT" {
					want = "INT\n"
					if strings.HasPrefix(at.name, "twice") {
						want = "INT\nINT\n"
					}
				}
				for _, name := range []string{"iop-edge", "iop-node"} {
					if !at.once {
						break
					}
					got, _ := os.ReadFile(filepath.Join(dir, name+".sig"))
					if string(got) != want {
						t.Errorf("%s got signals %q, want %q (each once)", name, got, want)
					}
				}
			})
		}
	}
}
