//go:build unix

package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestRunStreamsOutputBeforeExit(t *testing.T) {
	r := newRig(t)
	goFile := filepath.Join(t.TempDir(), "go")
	sh := script(t, `echo first
while [ ! -e `+sq(goFile)+` ]; do sleep 0.02; done
echo second
`)
	inst := r.instance(t, []string{sh}, nil)
	sink := newChanSink()
	done := runAsync(context.Background(), inst, userRun(t, "hi"), sink)

	if d := recvDelta(t, sink); d != "first\n" {
		t.Fatalf("first delta = %q, want %q", d, "first\n")
	}
	select {
	case o := <-done:
		t.Fatalf("run finished before the script was released: %+v", o)
	default:
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := await(t, done)
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	if o.res.FinishReason != "stop" || o.res.Usage != nil {
		t.Fatalf("result = %+v, want stop without usage", o.res)
	}
	if got := sink.rest(); got != "second\n" {
		t.Fatalf("rest = %q, want %q", got, "second\n")
	}
}

func TestRunPromptOnStdin(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, "exec cat\n")}, nil)

	got, err := runSync(t, inst, userRun(t, "hello 世界\nline two"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got != "hello 世界\nline two" {
		t.Fatalf("stdin seen by the CLI = %q", got)
	}

	req := &iop.RunRequest{Operation: adapter.OpChat, Input: chatJSON(t, "system", "be brief", "user", "hi")}
	got, err = runSync(t, inst, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := "System: be brief\n\nUser: hi"; got != want {
		t.Fatalf("stdin seen by the CLI = %q, want %q", got, want)
	}
}

func TestRunNeverSplitsUTF8(t *testing.T) {
	r := newRig(t)
	// "é" is \303\251: the first byte arrives alone, 200ms before the second.
	inst := r.instance(t, []string{script(t, `printf 'a\303'; sleep 0.2; printf '\251b\n'`)}, nil)
	sink := newChanSink()
	o := await(t, runAsync(context.Background(), inst, userRun(t, "x"), sink))
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	var all strings.Builder
	for _, d := range drain(sink) {
		if !utf8.ValidString(d) {
			t.Errorf("delta %q is not valid UTF-8", d)
		}
		all.WriteString(d)
	}
	if all.String() != "aéb\n" {
		t.Fatalf("output = %q, want %q", all.String(), "aéb\n")
	}
}

func TestRunNonZeroExitCarriesStderrTail(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, "echo partial\necho 'boom: bad thing' >&2\nexit 3\n")}, nil)

	_, err := runSync(t, inst, userRun(t, "x"))
	if errCode(err) != adapter.CodeUpstream {
		t.Fatalf("err = %v, want code %s", err, adapter.CodeUpstream)
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 3 {
		t.Fatalf("err = %v, want it to wrap exit status 3", err)
	}
	if want := "cli exited with status 3: boom: bad thing"; errMessage(err) != want {
		t.Fatalf("message = %q, want %q", errMessage(err), want)
	}
}

func TestRunStderrIsBounded(t *testing.T) {
	r := newRig(t)
	sh := script(t, `i=0
while [ $i -lt 200 ]; do printf 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' >&2; i=$((i+1)); done
echo THE-END >&2
exit 1
`)
	inst := r.instance(t, []string{sh}, map[string]string{SettingMaxStderrBytes: "32"})
	_, err := runSync(t, inst, userRun(t, "x"))
	msg := errMessage(err)
	prefix := "cli exited with status 1: "
	if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, "THE-END") || len(msg) > len(prefix)+32 {
		t.Fatalf("message = %q, want the last 32 stderr bytes after %q", msg, prefix)
	}
}

func TestRunCommandNotFound(t *testing.T) {
	r := newRig(t)
	for _, prog := range []string{"/nonexistent/iop-no-such-cli", "iop-no-such-cli-on-path"} {
		inst := r.instance(t, []string{prog}, nil)
		_, err := runSync(t, inst, userRun(t, "x"))
		if errCode(err) != adapter.CodeUpstream {
			t.Errorf("%s: err = %v, want code %s", prog, err, adapter.CodeUpstream)
		}
	}
}

// grandchildScript starts a background grandchild, records its pid, announces
// itself and waits. extra runs first (e.g. a trap).
func grandchildScript(t *testing.T, pidFile, extra string) string {
	return script(t, extra+`
sleep 300 &
echo $! > `+sq(pidFile)+`
echo started
wait
`)
}

func TestRunCancelKillsProcessGroup(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	inst := r.instance(t, []string{grandchildScript(t, pidFile, "")}, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newChanSink()
	done := runAsync(ctx, inst, userRun(t, "x"), sink)
	if d := recvDelta(t, sink); d != "started\n" {
		t.Fatalf("delta = %q", d)
	}
	pid := readPID(t, pidFile)
	if processGone(pid) {
		t.Fatal("grandchild not running before cancel")
	}
	cancel()
	o := await(t, done)
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", o.err)
	}
	eventually(t, "grandchild killed", func() bool { return processGone(pid) })
}

func TestRunKillEscalatesAfterGrace(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The script and its grandchild ignore SIGTERM: only SIGKILL ends them.
	sh := grandchildScript(t, pidFile, "trap '' TERM")
	inst := r.instance(t, []string{sh}, map[string]string{SettingKillGraceMS: "300"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newChanSink()
	done := runAsync(ctx, inst, userRun(t, "x"), sink)
	recvDelta(t, sink)
	pid := readPID(t, pidFile)
	start := time.Now()
	cancel()
	o := await(t, done)
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", o.err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("returned after %s, before the kill grace", waited)
	}
	eventually(t, "grandchild killed", func() bool { return processGone(pid) })
}

func TestRunTimeout(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfgSec        int32
		reqSec        uint32
		wantTimeoutIn time.Duration
	}{
		{"config", 1, 0, time.Second},
		{"request wins", 600, 1, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			inst := r.instanceCfg(t, &iop.AdapterConfig{
				Name: "agent", Command: []string{grandchildScript(t, pidFile, "")}, TimeoutSec: tc.cfgSec,
			})
			req := userRun(t, "x")
			req.TimeoutSec = tc.reqSec
			start := time.Now()
			_, err := runSync(t, inst, req)
			if errCode(err) != adapter.CodeTimeout {
				t.Fatalf("err = %v, want code %s", err, adapter.CodeTimeout)
			}
			if took := time.Since(start); took < tc.wantTimeoutIn || took > tc.wantTimeoutIn+5*time.Second {
				t.Fatalf("timed out after %s, want about %s", took, tc.wantTimeoutIn)
			}
			pid := readPID(t, pidFile)
			eventually(t, "grandchild killed", func() bool { return processGone(pid) })
		})
	}
}

func TestRunStopsWhenSinkFails(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	inst := r.instance(t, []string{grandchildScript(t, pidFile, "")}, nil)
	sinkErr := errors.New("stream gone")

	o := await(t, runAsync(context.Background(), inst, userRun(t, "x"), failingSink{sinkErr}))
	if !errors.Is(o.err, sinkErr) {
		t.Fatalf("err = %v, want the sink error", o.err)
	}
	pid := readPID(t, pidFile)
	eventually(t, "grandchild killed", func() bool { return processGone(pid) })
}

func TestRunExitKillsLeftoverGroup(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The CLI exits at once, leaving a background grandchild that still
	// holds stdout.
	sh := script(t, "sleep 300 &\necho $! > "+sq(pidFile)+"\necho done\n")
	inst := r.instance(t, []string{sh}, nil)

	start := time.Now()
	got, err := runSync(t, inst, userRun(t, "x"))
	if err != nil || got != "done\n" {
		t.Fatalf("Run = %q, %v", got, err)
	}
	if took := time.Since(start); took > pipeDrainGrace {
		t.Errorf("run took %s: the leftover grandchild was not killed promptly", took)
	}
	pid := readPID(t, pidFile)
	eventually(t, "grandchild killed", func() bool { return processGone(pid) })
}

// findSink looks for needle in the deltas without keeping them, so a flood
// of output costs the test no memory and never blocks the run.
type findSink struct {
	needle string
	carry  string // the last len(needle)-1 bytes seen
	found  bool
}

func (s *findSink) Delta(text string) error {
	w := s.carry + text
	s.found = s.found || strings.Contains(w, s.needle)
	s.carry = w[max(len(w)-len(s.needle)+1, 0):]
	return nil
}

// A process that left the CLI's group (setsid) is beyond the group kill
// and may keep the inherited stdout open and written to after the CLI
// exited. The run must still end soon after the CLI, with its answer, not
// last as long as that process writes.
func TestRunEndsWhenEscapedProcessKeepsWriting(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid binary")
	}
	for _, tc := range []struct{ name, writer string }{
		// A slow writer: output never pauses for the drain grace.
		{"trickle", `while :; do echo tick; sleep 0.1; done`},
		// A fast one: output never stops, and the sink is always busy.
		{"flood", `exec yes tick`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			// The CLI exits only once the escaped writer runs, so the
			// group kill at its exit cannot catch the writer first.
			sh := script(t, sq(setsid)+` sh -c 'echo $$ > "$1"; `+tc.writer+`' sh `+sq(pidFile)+` &
while [ ! -s `+sq(pidFile)+` ]; do sleep 0.01; done
echo done
`)
			inst := r.instance(t, []string{sh}, nil)
			sink := &findSink{needle: "done\n"}
			done := runAsync(context.Background(), inst, userRun(t, "x"), sink)
			pid := readPID(t, pidFile)
			t.Cleanup(func() {
				// Whatever happens to the run, the writer must not
				// outlive the test (it dies of SIGPIPE once the run
				// closed its end of the pipe).
				if !processGone(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			start := time.Now()
			o := await(t, done)
			if o.err != nil {
				t.Fatalf("Run: %v", o.err)
			}
			if took := time.Since(start); took > pipeDrainGrace+3*time.Second {
				t.Errorf("run ended %s after the CLI was released", took)
			}
			if !sink.found {
				t.Error("the answer lacks the CLI's own output")
			}
			eventually(t, "escaped writer gone (SIGPIPE)", func() bool { return processGone(pid) })
		})
	}
}

// slowSink takes its time for every delta, like a client reading slowly.
type slowSink struct {
	delay time.Duration
	n     int
}

func (s *slowSink) Delta(text string) error {
	s.n += len(text)
	time.Sleep(s.delay)
	return nil
}

// What the CLI left in the pipe when it exited is all delivered, however
// long a slow sink takes for it: the drain grace does not count sink time.
func TestRunDrainOutlastsSlowSink(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if runtime.GOOS != "linux" || err != nil {
		t.Skip("needs Linux (F_SETPIPE_SZ) and perl")
	}
	r := newRig(t)
	// The CLI grows its stdout pipe to 1 MiB, fills it and exits at once:
	// 33 deltas and more than the drain grace are still to come.
	const size = 1<<20 + 32<<10
	sh := script(t, sq(perl)+` -e 'fcntl(STDOUT, 1031, 1 << 20) or exit 7; print "x" x `+strconv.Itoa(size)+`'`+"\n")
	inst := r.instance(t, []string{sh}, nil)
	sink := &slowSink{delay: 100 * time.Millisecond}
	o := await(t, runAsync(context.Background(), inst, userRun(t, "x"), sink))
	if ee, ok := errors.AsType[*exec.ExitError](o.err); ok && ee.ExitCode() == 7 {
		t.Skip("cannot grow the pipe to 1 MiB here")
	}
	if o.err != nil || sink.n != size {
		t.Fatalf("Run: %v after %d of %d bytes", o.err, sink.n, size)
	}
}

func TestRunRejectsWorkspaceEscapes(t *testing.T) {
	r := newRig(t)
	root := r.realRoot(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o750); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	inst := r.instance(t, []string{script(t, "touch "+sq(marker)+"\n")}, nil)

	for _, ws := range []string{"/etc", outside, "..", "../x", "a/../../b", "a/..", "out", "out/sub", "a/../out"} {
		req := userRun(t, "x")
		req.Workspace = ws
		_, err := runSync(t, inst, req)
		if errCode(err) != adapter.CodeInvalidRequest {
			t.Errorf("workspace %q: err = %v, want code %s", ws, err, adapter.CodeInvalidRequest)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Error("the CLI ran for a rejected workspace")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something was created outside the root: %v", entries)
	}
}

func TestRunWorkspaceCreatedInsideRoot(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, "pwd -P\n")}, nil)

	for ws, rel := range map[string]string{"": "", "team/proj": "team/proj", "./x/": "x"} {
		req := userRun(t, "x")
		req.Workspace = ws
		got, err := runSync(t, inst, req)
		if err != nil {
			t.Fatalf("workspace %q: %v", ws, err)
		}
		want := filepath.Join(r.realRoot(t), rel)
		if strings.TrimSpace(got) != want {
			t.Errorf("workspace %q: cwd = %q, want %q", ws, strings.TrimSpace(got), want)
		}
		if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
			t.Errorf("workspace %q: %s not created", ws, want)
		}
	}
}

func TestRunEnvironmentIsAllowListOnly(t *testing.T) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env binary")
	}
	t.Setenv("IOP_TEST_SECRET", "hunter2")
	t.Setenv("IOP_TEST_ALLOWED", "visible")
	t.Setenv("LANG", "C.UTF-8")
	r := newRig(t) // Getenv nil: the Node's own environment
	// env itself prints exactly the environment it was given.
	inst := r.instance(t, []string{envBin}, map[string]string{SettingEnvAllow: "IOP_TEST_ALLOWED, IOP_TEST_UNSET"})

	got, err := runSync(t, inst, userRun(t, "x"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	slices.Sort(lines)
	var want []string
	for _, k := range []string{"HOME", "IOP_TEST_ALLOWED", "LANG", "PATH"} {
		if v := os.Getenv(k); v != "" {
			want = append(want, k+"="+v)
		}
	}
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("child environment = %q, want exactly %q", lines, want)
	}
	if strings.Contains(got, "hunter2") {
		t.Fatal("secret reached the child")
	}
}

func TestChildEnv(t *testing.T) {
	vars := map[string]string{"PATH": "/bin", "HOME": "/h", "SECRET": "s", "EMPTY": ""}
	got := childEnv([]string{"EMPTY", "HOME", "MISSING", "PATH"}, func(k string) string { return vars[k] })
	if want := []string{"HOME=/h", "PATH=/bin"}; !slices.Equal(got, want) {
		t.Fatalf("childEnv = %q, want %q", got, want)
	}
	if got := childEnv(nil, func(string) string { return "x" }); got == nil {
		t.Fatal("childEnv returned nil, which would inherit the Node environment")
	}
}

func TestRunRejectsUnsupportedOperationAndBadInput(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, "cat\n")}, nil)
	for _, tc := range []struct {
		req  *iop.RunRequest
		code iop.ErrorCode
	}{
		{&iop.RunRequest{Operation: adapter.OpEmbedding, Input: &iop.RunInput{EmbedInputs: []string{"x"}}}, adapter.CodeUnsupported},
		{&iop.RunRequest{Operation: adapter.OpChat}, adapter.CodeInvalidRequest},
		{&iop.RunRequest{Operation: adapter.OpChat, Input: &iop.RunInput{}}, adapter.CodeInvalidRequest},
	} {
		_, err := runSync(t, inst, tc.req)
		if errCode(err) != tc.code {
			t.Errorf("%s %s: err = %v, want code %s", tc.req.Operation, tc.req.Input, err, tc.code)
		}
	}
	got, err := runSync(t, inst, &iop.RunRequest{Operation: adapter.OpCompletion, Input: &iop.RunInput{Prompt: "complete me"}})
	if err != nil || got != "complete me" {
		t.Fatalf("completion = %q, %v", got, err)
	}
}

func TestTunnelUnsupported(t *testing.T) {
	inst := newRig(t).instance(t, []string{"true"}, nil)
	if err := inst.Tunnel(context.Background(), &iop.ProviderTunnelRequest{}, nil); !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("Tunnel = %v, want ErrUnsupported", err)
	}
	if err := inst.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}
