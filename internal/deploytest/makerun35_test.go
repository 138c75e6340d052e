package deploytest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
)

// makeRunWords is what the stream in flight asks the slow mock to echo: a
// word every makeRunDelayMS, about 1.2 s in all, well inside the node's
// default 10 s drain.
const (
	makeRunWords   = "one two three four five six"
	makeRunDelayMS = 200
)

// TestMakeRunStopLetsStreamFinish runs `make run` as the README says (its
// recipe, the real binaries, a mock that answers slowly) and stops it the
// ways an operator does: Ctrl-C (SIGINT to the terminal's whole foreground
// group), SIGTERM to that group (a supervisor), SIGTERM to make alone
// (`kill <pid>`). Each must reach the edge and the node once: a second
// copy is their "stop at once", which cut a stream in flight (the recipe's
// trap used to re-signal processes that had already had the terminal's
// SIGINT). The stream in flight must end whole, with [DONE], and make must
// exit 0 naming the signal.
func TestMakeRunStopLetsStreamFinish(t *testing.T) {
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if signal.Ignored(os.Interrupt) {
		// Started in the background of a shell without job control: the
		// children would inherit SIGINT ignored, and bash cannot trap a
		// signal ignored at entry. Handling it here makes exec reset it.
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		t.Cleanup(func() { signal.Stop(ch) })
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/iop-edge", "./cmd/iop-node")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	makefile, err := os.ReadFile(path("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		sig      syscall.Signal
		makeOnly bool
	}{
		{"ctrl-c: SIGINT to the group", syscall.SIGINT, false},
		{"SIGTERM to the group", syscall.SIGTERM, false},
		{"SIGTERM to make alone", syscall.SIGTERM, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			httpAddr, nodeAddr := loopbackAddr(t), loopbackAddr(t)
			writeFile(t, filepath.Join(dir, "Makefile"), string(makefile))
			writeFile(t, filepath.Join(dir, "configs", "edge.yaml"), fmt.Sprintf(`listen: {http: %q, node: %q}
log: {level: info, format: console}
nodes:
  - id: local
    token: quickstart-token
    providers:
      - {name: mock, type: mock, capacity: 8, delay_ms: %d}
models:
  - name: demo
    providers: [{node: local, provider: mock, target: mock-echo}]
`, httpAddr, nodeAddr, makeRunDelayMS))
			writeFile(t, filepath.Join(dir, "configs", "node.yaml"), fmt.Sprintf(`edge: {address: %q}
node: {id: local, token: quickstart-token}
reconnect: {interval_sec: 0.1, max_attempts: 0}
store_dir: ./var/node
workspace_root: ./var/workspaces
log: {level: info, format: console}
`, nodeAddr))

			mk, done, waitErr := startMakeRun(t, dir, bin)
			t.Cleanup(func() {
				select {
				case <-done:
				default:
					_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
					<-done
				}
				// The binaries run in groups of their own: stop any left
				// (by pid, found by the unique directory they run from).
				killUnder(bin)
			})

			base := "http://" + httpAddr
			stack.WaitFor(t, 60*time.Second, "make run ready", func() bool {
				resp, err := http.Get(base + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
				`{"model":"demo","stream":true,"messages":[{"role":"user","content":"`+makeRunWords+`"}]}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			var text strings.Builder
			for sc.Scan() && !strings.Contains(sc.Text(), `"content":"one"`) {
			}
			text.WriteString("one")

			// The first word is out: the stream is in flight. Stop now.
			target := -mk.Process.Pid
			if tc.makeOnly {
				target = mk.Process.Pid
			}
			if err := syscall.Kill(target, tc.sig); err != nil {
				t.Fatal(err)
			}
			var last string
			for sc.Scan() {
				line := sc.Text()
				if line == "" {
					continue
				}
				last = line
				if i := strings.Index(line, `"content":"`); i >= 0 {
					rest := line[i+len(`"content":"`):]
					text.WriteString(rest[:strings.IndexByte(rest, '"')])
				}
			}
			if last != "data: [DONE]" || text.String() != makeRunWords {
				t.Errorf("stream after %v: text %q, last line %q; want %q and [DONE] (cut by a second signal?)",
					tc.sig, text.String(), last, makeRunWords)
			}

			select {
			case <-done:
				// GNU make, once its recipe has ended, re-raises a SIGINT
				// or SIGTERM it got itself (a shell then shows 130 or
				// 143): exit 0, or death by that signal, is a clean stop.
				if !cleanStop(*waitErr, tc.sig) {
					t.Errorf("make run after %v: %v, want exit 0 or %v", tc.sig, *waitErr, tc.sig)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("make run still running 60s after %v", tc.sig)
			}
			logBytes, err := os.ReadFile(filepath.Join(dir, "make.log"))
			if err != nil {
				t.Fatal(err)
			}
			log := string(logBytes)
			if want := "iop: stopped on " + sigName(tc.sig); !strings.Contains(log, want) {
				t.Errorf("make run's output lacks %q:\n%s", want, lastLines(log, 15))
			}
			for _, want := range []string{"iop-edge stopped", "iop-node stopped"} {
				if !strings.Contains(log, want) {
					t.Errorf("make run's output lacks %q, the line that says a binary has stopped:\n%s", want, lastLines(log, 15))
				}
			}
			// The edge's last line carries its exit code: 0 after a stop
			// signal (make run exits 0 on the signal whatever the code).
			if want := "iop-edge stopped\t{\"exit_code\": 0}"; !strings.Contains(log, want) {
				t.Errorf("make run's output lacks %q:\n%s", want, lastLines(log, 15))
			}
			if strings.Contains(log, "second signal:") {
				t.Errorf("a process was signalled twice:\n%s", lastLines(log, 15))
			}
		})
	}
}

// killUnder SIGKILLs every process whose executable lies under dir: the
// edge and node a failed subtest left behind in their own groups.
func killUnder(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range procs {
		target, err := os.Readlink(exe)
		if err != nil || !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(exe, "/proc/%d/exe", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func cleanStop(err error, sig syscall.Signal) bool {
	if err == nil {
		return true
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

// loopbackAddr is a port free on 127.0.0.1 a moment ago (the binaries
// bind it themselves; nothing else on a test box takes it meanwhile).
func loopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startMakeRun starts `make run` in dir (GO=true: built already; the
// binaries in bin), in a process group of its own, with env added to the
// test's environment and its output in dir/make.log — a file, not a
// buffer, so that Wait does not wait on a pipe a stray child might hold
// open. done closes when make has exited, *waitErr then its exit.
func startMakeRun(t *testing.T, dir, bin string, env ...string) (mk *exec.Cmd, done <-chan struct{}, waitErr *error) {
	t.Helper()
	mk = exec.Command("make", "--no-print-directory", "-C", dir, "run", "GO=true", "BIN="+bin)
	if len(env) > 0 {
		mk.Env = append(os.Environ(), env...)
	}
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(dir, "make.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	mk.Stdout, mk.Stderr = out, out
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	waitErr = new(error)
	// Owner: the calling test. Stops when make exits; the caller's
	// deadline (or its cleanup) kills make's group if it does not.
	go func() { *waitErr = mk.Wait(); close(exited) }()
	return mk, exited, waitErr
}
