package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A killed test process (SIGKILL, a -timeout panic) runs no cleanups, so
// nothing it registered stops the commands it started: only the
// parent-death signal they were started with does. DiesWithParent checks
// that signal end to end: it re-executes the test binary to run a starter
// test, which starts the command, gives its pid (StarterStarted) and is
// then killed; the command must die with it.

// orphanDirEnv names, in a re-executed test process, the directory it
// works in (its TMPDIR too, so its temp dirs, never cleaned up by a
// killed process, are the parent test's).
const orphanDirEnv = "IOP_TESTPROC_ORPHAN_DIR"

// orphanPIDPrefix starts the line on which the re-executed test process
// gives the pid of the command it started.
const orphanPIDPrefix = "orphan pid "

// StarterDir returns the directory a starter test, run re-executed by
// DiesWithParent, works in; outside that re-executed process it skips the
// test, naming parent, the test that runs it.
func StarterDir(t testing.TB, parent string) string {
	t.Helper()
	dir := os.Getenv(orphanDirEnv)
	if dir == "" {
		t.Skipf("run by %s", parent)
	}
	return dir
}

// StartLogged starts cmd with its output to the file logName, not to a
// pipe: a pipe closed with the (killed) test process would end the
// orphan by SIGPIPE at its next log line, whatever its parent-death
// signal. stop kills cmd and reaps it.
func StartLogged(t testing.TB, cmd *exec.Cmd, logName string) (stop func()) {
	t.Helper()
	logf, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}

// StarterStarted gives DiesWithParent the pid of the command the starter
// test started, once it is past its start-up, and waits to be killed;
// should it not be, the command is stopped (stop) after a bound and the
// test fails.
func StarterStarted(t testing.TB, pid int, stop func()) {
	t.Helper()
	fmt.Printf("%s%d\n", orphanPIDPrefix, pid)
	time.Sleep(time.Minute)
	stop()
	t.Fatal("not killed by the test that ran it")
}
