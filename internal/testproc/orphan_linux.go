package testproc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DiesWithParent re-executes the test binary to run only the test
// starter, which starts the command what (StarterDir, StartLogged,
// StarterStarted), and kills that test process once it gives the
// command's pid, within startWait; the command must then be gone within
// 10 s. env, called once the test is not skipped, adds to the re-executed
// process's environment (what it needs to start the command). The test is
// skipped with -short and, since the signal is Linux's, elsewhere.
func DiesWithParent(t *testing.T, starter, what string, startWait time.Duration, env func() []string) {
	t.Helper()
	if os.Getenv(orphanDirEnv) != "" {
		t.Skip("in the re-executed test process")
	}
	if testing.Short() {
		t.Skipf("runs %s in a re-executed test process", what)
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^"+starter+"$", "-test.count=1", "-test.timeout=3m")
	child.Env = append(append(os.Environ(), orphanDirEnv+"="+dir, "TMPDIR="+dir), env()...)
	// Read only once the child is reaped (output): nothing writes them
	// then.
	var childOut, childErr bytes.Buffer
	child.Stderr = &childErr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	pids := make(chan int, 1)
	// Owner: the test. Ends when the child's stdout closes (it exits:
	// killed below, or by its own bound), then reaps it.
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			childOut.Write([]byte(line + "\n"))
			if p, ok := strings.CutPrefix(line, orphanPIDPrefix); ok {
				if pid, err := strconv.Atoi(p); err == nil {
					pids <- pid
				}
			}
		}
		_ = child.Wait()
	}()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
	})
	// output ends the child and gives what it wrote.
	output := func() string {
		_ = child.Process.Kill()
		<-exited
		return childOut.String() + childErr.String()
	}
	var pid int
	select {
	case pid = <-pids:
	case <-exited:
		t.Fatalf("the test process exited without starting %s:\n%s", what, output())
	case <-time.After(startWait):
		t.Fatalf("no %s started:\n%s", what, output())
	}
	start, ok := Started(pid)
	if !ok {
		t.Fatalf("%s %d is not running:\n%s", what, pid, output())
	}
	// Whatever happens, it does not outlive this test.
	t.Cleanup(func() {
		if procRunning(pid, start) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// Killed: no cleanup of the child's runs.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	WaitGone(t, what+" (after the test process that started it was killed)", pid, start, 10*time.Second)
}

// Started returns when the running process pid started, for WaitGone; ok
// is false when it does not run (no such process, or a zombie).
func Started(pid int) (start string, ok bool) {
	state, start, ok := procStat(pid)
	if !ok || state == "Z" || state == "X" {
		return "", false
	}
	return start, true
}

// WaitGone fails the test unless the process pid, started at start
// (Started), is gone within d: exited, a zombie, or its pid given to
// another process.
func WaitGone(t testing.TB, what string, pid int, start string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for procRunning(pid, start) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: pid %d still runs after %s", what, pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStat reads /proc/<pid>/stat: the process's state and start time;
// ok is false when there is no such process.
func procStat(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	// After the command, in parentheses and possibly with spaces: the
	// state (field 3) and, 19 fields on, the start time (field 22).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}

// procRunning reports whether the process pid that started at start
// still runs: not gone, not a zombie, and not another process given the
// same pid.
func procRunning(pid int, start string) bool {
	state, st, ok := procStat(pid)
	return ok && st == start && state != "Z" && state != "X"
}
