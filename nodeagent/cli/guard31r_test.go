//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/internal/testproc"
)

// startSleepGroup starts sleep 600 as the leader of a new process group,
// killed and reaped at cleanup, and returns its pid (the group id).
func startSleepGroup(t *testing.T) int {
	t.Helper()
	c := exec.Command("sleep", "600")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
	})
	return c.Process.Pid
}

// A guard started any other way than by startGuard (by hand, or by a
// binary that no longer holds its pipe) kills nothing: not a group it is
// not a member of, nor its own group when fd 3 is not its pipe.
func TestGuardStartedAnyOtherWayKillsNothing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		inGroup bool
		pipe    bool
	}{
		{"outside the group, with its pipe", false, true},
		{"in the group, without its pipe", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgid := startSleepGroup(t)
			start, ok := testproc.Started(pgid)
			if !ok {
				t.Fatal("sleep not running")
			}
			g := &exec.Cmd{Path: exe, Args: []string{guardArg0, strconv.Itoa(pgid)}, Env: []string{}}
			if tc.inGroup {
				g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
			}
			if tc.pipe {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				g.ExtraFiles = []*os.File{r}
				defer r.Close()
				// No writer once started: the guard reads EOF at once.
				defer func() { _ = w.Close() }()
				if err := g.Start(); err != nil {
					t.Fatal(err)
				}
				_ = w.Close()
			} else if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			err := g.Wait()
			if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 {
				t.Errorf("guard: %v, want exit status 2", err)
			}
			if st, ok := testproc.Started(pgid); !ok || st != start {
				t.Fatal("the guard killed the group")
			}
		})
	}
}

// A binary that never called RunGuardIfAsked is not re-executed as a
// guard (it would run its own main): the run goes on unguarded and says
// why.
func TestNoGuardWithoutTheBinarysEntry(t *testing.T) {
	guardEntry.Store(false)
	defer guardEntry.Store(true)
	out, err := runProcess(context.Background(), trueSpec(t), failingSink{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out.guardErr, errNoGuardEntry) {
		t.Fatalf("guardErr = %v, want errNoGuardEntry", out.guardErr)
	}
}

// procCounts is what a run could leak in the node: open descriptors,
// children (zombies included) and threads.
func procCounts(t *testing.T) (fds, children, threads int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds = len(ents)
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == me {
			children++
		}
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return fds, children, threads
}

// Fifty guarded runs leave no descriptor (the guard's pipe), no child
// (the guard, the CLI) and no thread (the waiter's locked thread goes
// back to the runtime) behind: the guard never outlives its run.
func TestGuardedRunsLeaveNothingBehind(t *testing.T) {
	spec := trueSpec(t)
	run := func() {
		out, err := runProcess(context.Background(), spec, failingSink{})
		if err != nil || out.guardErr != nil {
			t.Fatalf("run: %v, guard: %v", err, out.guardErr)
		}
	}
	run() // the runtime's own first-use threads and descriptors
	fds, children, threads := procCounts(t)
	for range 50 {
		run()
	}
	fds2, children2, threads2 := procCounts(t)
	// More, not different: what an earlier test left may end meanwhile.
	if fds2 > fds || children2 > children {
		t.Errorf("after 50 runs: %d descriptors (was %d), %d children (was %d)", fds2, fds, children2, children)
	}
	// The runtime may start a thread or two meanwhile (GC, sysmon's
	// helpers); one kept per run would be 50.
	if threads2 > threads+5 {
		t.Errorf("after 50 runs: %d threads (was %d)", threads2, threads)
	}
}

// The guard inherits only its pipe (fd 3) and /dev/null as stdio, and no
// environment: nothing of the node's keys, nothing of the CLI's output.
func TestGuardInheritsOnlyItsPipe(t *testing.T) {
	pgid := startSleepGroup(t)
	g, err := startGuard(pgid)
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	pid := g.cmd.Process.Pid
	proc := func(name string) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		return string(b)
	}
	// Waits for the cause, the guard blocked reading its pipe: on any of
	// its threads, since the Go scheduler may run the reading goroutine
	// on another thread than the first (whose wchan is then a futex).
	readingPipe := func() (bool, []string) {
		var seen []string
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, task.Name()))
			if strings.Contains(string(b), "pipe_read") {
				return true, nil
			}
			seen = append(seen, string(b))
		}
		return false, seen
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, seen := readingPipe()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("guard never waits on its pipe (its threads' wchan %q)", seen)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(g.w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": "/dev/null", "1": "/dev/null", "2": "/dev/null", "3": fmt.Sprintf("pipe:[%d]", st.Ino)}
	for _, e := range ents {
		n := e.Name()
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, n))
		if w, ok := want[n]; ok {
			if l != w {
				t.Errorf("guard's fd %s is %q, want %q", n, l, w)
			}
			delete(want, n)
			continue
		}
		// Besides: what the guard's runtime opens itself, and what
		// this process was given without close-on-exec by its own
		// parent (every child inherits those, the CLI too).
		if mine, _ := os.Readlink("/proc/self/fd/" + n); mine == l ||
			strings.HasPrefix(l, "anon_inode:") || strings.HasPrefix(l, "/sys/fs/cgroup/") {
			continue
		}
		t.Errorf("guard holds fd %s: %q", n, l)
	}
	if len(want) > 0 {
		t.Errorf("guard lacks fds %v", want)
	}
	if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); cwd != "/" {
		t.Errorf("guard's working directory %q, want /", cwd)
	}
	if env := proc("environ"); env != "" {
		t.Errorf("guard's environment %q, want none", env)
	}
	if pg, err := syscall.Getpgid(pid); err != nil || pg != pgid {
		t.Errorf("guard's group %d (%v), want %d", pg, err, pgid)
	}
}

// deletedExeEnv runs TestRunWithTheBinaryDeletedHelper in a copy of the
// test binary, which removes that copy and replaces it with another file
// (an upgrade) before it runs a CLI.
const deletedExeEnv = "IOP_CLI_DELETED_EXE"

// A node whose binary was deleted or replaced on disk (an upgrade under
// a running node) still runs its CLIs, guarded by its own image.
func TestRunWithTheBinaryDeleted(t *testing.T) {
	if os.Getenv(deletedExeEnv) != "" {
		t.Skip("in the re-executed test process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cli.test")
	if err := os.WriteFile(cp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(cp, "-test.run=^TestRunWithTheBinaryDeletedHelper$", "-test.count=1", "-test.v", "-test.timeout=2m")
	c.Env = append(os.Environ(), deletedExeEnv+"="+cp)
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "guarded run ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestRunWithTheBinaryDeletedHelper(t *testing.T) {
	cp := os.Getenv(deletedExeEnv)
	if cp == "" {
		t.Skip("run by TestRunWithTheBinaryDeleted")
	}
	if err := os.Remove(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The guard is this image, re-executed from /proc/self/exe.
	out, err := runProcess(context.Background(), trueSpec(t), failingSink{})
	if err != nil || out.guardErr != nil {
		t.Fatalf("run: %v, guard: %v", err, out.guardErr)
	}
	fmt.Println("guarded run ok")
}

// A run without its guard is warned of once per adapter, on both paths
// (with and without a session); a guarded run is not warned of.
func TestUnguardedRunsWarnedOnce(t *testing.T) {
	r := newRig(t)
	core, logs := observer.New(zap.WarnLevel)
	r.env.Logger = zap.New(core)
	inst := r.instance(t, []string{script(t, "cat >/dev/null; echo ok\n")}, map[string]string{
		SettingSessionArgs: `["--session-id","{session_uuid}"]`,
		SettingResumeArgs:  `["--resume","{session}"]`,
	})
	warned := func() int { return logs.FilterMessageSnippet("descendants would outlive the node").Len() }
	if _, err := runSync(t, inst, userRun(t, "x")); err != nil {
		t.Fatal(err)
	}
	if n := warned(); n != 0 {
		t.Fatalf("a guarded run warned of %d times", n)
	}
	guardEntry.Store(false)
	defer guardEntry.Store(true)
	if _, err := runSync(t, inst, sessionRun(t, "s-1", "user", "x")); err != nil {
		t.Fatal(err)
	}
	if n := warned(); n != 1 {
		t.Fatalf("an unguarded session run warned of %d times, want 1", n)
	}
	for range 2 {
		if _, err := runSync(t, inst, userRun(t, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := warned(); n != 1 {
		t.Fatalf("three unguarded runs warned of %d times, want 1", n)
	}
	// The other path warns too, on an adapter of its own.
	inst2 := r.instance(t, []string{script(t, "cat >/dev/null; echo ok\n")}, nil)
	if _, err := runSync(t, inst2, userRun(t, "x")); err != nil {
		t.Fatal(err)
	}
	if n := warned(); n != 2 {
		t.Fatalf("an unguarded plain run on a second adapter: %d warnings in all, want 2", n)
	}
}

// guardOf returns the pid of the guard in process group pgid, 0 if none
// runs (a zombie does not).
func guardOf(pgid int) int {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !strings.HasPrefix(string(cmdline), guardArg0+"\x00") {
			continue
		}
		if pg, err := syscall.Getpgid(pid); err == nil && pg == pgid {
			if _, ok := testproc.Started(pid); ok {
				return pid
			}
		}
	}
	return 0
}

// The node's stop sends SIGTERM to the CLI's group: the guard stays,
// guarding the group through the kill grace, and is gone with the run.
func TestGuardOutlastsTheStopsSIGTERM(t *testing.T) {
	dir := t.TempDir()
	pidFile, termFile := filepath.Join(dir, "pid"), filepath.Join(dir, "term")
	r := newRig(t)
	inst := r.instance(t, []string{script(t,
		"trap 'echo term > "+sq(termFile)+"' TERM\necho $$ > "+sq(pidFile)+"\nwhile :; do sleep 0.05; done\n")},
		map[string]string{"kill_grace_ms": "60000"})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, inst, userRun(t, "x"), newChanSink())
	pid := readPID(t, pidFile)
	guard := 0
	deadline := time.Now().Add(20 * time.Second)
	for guard = guardOf(pid); guard == 0; guard = guardOf(pid) {
		if time.Now().After(deadline) {
			t.Fatal("no guard in the CLI's group")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Waits until the guard ignores SIGTERM (it does before it reads
	// its pipe).
	for !strings.Contains(readProc(guard, "wchan"), "pipe_read") {
		if time.Now().After(deadline) {
			t.Fatal("guard never waits on its pipe")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	for {
		if b, _ := os.ReadFile(termFile); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CLI never got SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if guardOf(pid) != guard {
		t.Fatal("the guard died of the stop's SIGTERM")
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // ends the grace
	await(t, done)
	if guardOf(pid) != 0 {
		t.Fatal("the guard outlived its run")
	}
}

func readProc(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	return string(b)
}
