package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanDirEnv names, in a re-executed test process, the directory it
// works in (its TMPDIR too, so its temp dirs, never cleaned up by a
// killed process, are the parent test's).
const orphanDirEnv = "IOP_EDGE_ORPHAN_DIR"

// orphanPIDPrefix starts the line on which the re-executed test process
// gives the pid of the iop-edge it started.
const orphanPIDPrefix = "orphan iop-edge pid "

// orphanProc reads /proc/<pid>/stat: the process's state and start time;
// ok is false when there is no such process.
func orphanProc(pid int) (state, start string, ok bool) {
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

// orphanRunning reports whether the process pid that started at start
// still runs: not gone, not a zombie, and not another process given the
// same pid.
func orphanRunning(pid int, start string) bool {
	state, st, ok := orphanProc(pid)
	return ok && st == start && state != "Z" && state != "X"
}

// A test process that dies without running its cleanups (SIGKILL, a
// -timeout panic) takes the iop-edge it started with it.
func TestEdgeDiesWithTheTestProcessThatStartedIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	if os.Getenv(orphanDirEnv) != "" {
		t.Skip("in the re-executed test process")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestOrphanEdgeStarter$", "-test.count=1", "-test.timeout=3m")
	child.Env = append(os.Environ(), orphanDirEnv+"="+dir, "TMPDIR="+dir, "IOP_EDGE_ORPHAN_BIN="+bin)
	var childErr syncBuffer
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
	var childOut syncBuffer
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
	var pid int
	select {
	case pid = <-pids:
	case <-exited:
		t.Fatalf("the test process exited without starting iop-edge:\n%s%s", childOut.String(), childErr.String())
	case <-time.After(time.Minute):
		t.Fatalf("no iop-edge started:\n%s%s", childOut.String(), childErr.String())
	}
	state, start, ok := orphanProc(pid)
	if !ok || state == "Z" {
		t.Fatalf("iop-edge %d is not running (%q):\n%s", pid, state, childErr.String())
	}
	// Whatever happens, it does not outlive this test.
	t.Cleanup(func() {
		if orphanRunning(pid, start) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// Killed: no cleanup of the child's runs.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(10 * time.Second)
	for orphanRunning(pid, start) {
		if time.Now().After(deadline) {
			t.Fatalf("iop-edge %d still runs 10s after the test process that started it was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOrphanEdgeStarter runs only re-executed by
// TestEdgeDiesWithTheTestProcessThatStartedIt: it starts iop-edge as the
// tests do, gives its pid and waits to be killed.
func TestOrphanEdgeStarter(t *testing.T) {
	dir := os.Getenv(orphanDirEnv)
	if dir == "" {
		t.Skip("run by TestEdgeDiesWithTheTestProcessThatStartedIt")
	}
	httpAddr := freeAddr(t)
	cfg := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: {http: %q, node: %q}
log: {level: info}
nodes:
  - id: a
    token: secret-a
    providers: [{name: m, type: mock, capacity: 1}]
models:
  - name: echo
    providers: [{node: a, provider: m, target: echo}]
`, httpAddr, freeAddr(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its output to a file, not a pipe: a pipe closed with this process
	// would end the orphan by SIGPIPE at its next log line, whatever its
	// parent-death signal.
	logName := filepath.Join(dir, "edge.log")
	logf, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Getenv("IOP_EDGE_ORPHAN_BIN"), "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	// Running, past its start-up: it serves.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(20 * time.Second)
	for !healthy(client, httpAddr) {
		if time.Now().After(deadline) {
			stop()
			b, _ := os.ReadFile(logName)
			t.Fatalf("edge never became healthy:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("%s%d\n", orphanPIDPrefix, cmd.Process.Pid)
	// The parent kills this process now; should it not, the edge is
	// stopped here, after a bound.
	time.Sleep(time.Minute)
	stop()
	t.Fatal("not killed by the test that ran it")
}
