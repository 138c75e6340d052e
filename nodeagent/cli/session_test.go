//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// argsScript prints its arguments on one line, then echoes stdin.
const argsScript = `printf 'args:%s\n' "$*"
cat
`

func sessionRun(t *testing.T, sid string, msgs ...string) *iop.RunRequest {
	return &iop.RunRequest{RunId: "r", SessionId: sid, Operation: adapter.OpChat, Input: chatJSON(t, msgs...)}
}

func readStateFile(t *testing.T, inst *instance, sid string) sessionState {
	t.Helper()
	st, err := readState(filepath.Join(inst.sessionsDir(), sessionDirName(sid)), sid)
	if err != nil {
		t.Fatalf("read state: %v", err)
	}
	return st
}

func TestSessionContinuesWithOwnID(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript), "-p"}, map[string]string{
		SettingSessionArgs: `["--session-id","{session_uuid}"]`,
		SettingResumeArgs:  `["--resume","{session}"]`,
	})

	got, err := runSync(t, inst, sessionRun(t, "s-1", "user", "first question"))
	if err != nil {
		t.Fatalf("run 1: %v", err)
	}
	if want := "args:-p --session-id " + sessionUUID("agent", "s-1", 0) + "\nfirst question"; got != want {
		t.Fatalf("run 1 = %q, want %q", got, want)
	}

	// A continuation sends only the last user message.
	got, err = runSync(t, inst, sessionRun(t, "s-1",
		"system", "sys", "user", "first question", "assistant", "answer", "user", "second question"))
	if err != nil {
		t.Fatalf("run 2: %v", err)
	}
	if want := "args:-p --resume s-1\nsecond question"; got != want {
		t.Fatalf("run 2 = %q, want %q", got, want)
	}
	if st := readStateFile(t, inst, "s-1"); st.Runs != 2 || st.UpstreamID != "" || st.LastUsedUnix == 0 {
		t.Fatalf("state = %+v", st)
	}

	// Another session starts fresh.
	got, err = runSync(t, inst, sessionRun(t, "s-2", "user", "q"))
	if err != nil || !strings.HasPrefix(got, "args:-p --session-id ") {
		t.Fatalf("other session = %q, %v", got, err)
	}
}

func TestSessionContinuesWithCapturedID(t *testing.T) {
	for _, stream := range []string{"stdout", "stderr"} {
		t.Run(stream, func(t *testing.T) {
			r := newRig(t)
			redirect := ""
			if stream == "stderr" {
				redirect = " >&2"
			}
			sh := script(t, `if [ $# -eq 0 ]; then echo 'banner session: abc-123'`+redirect+`; fi
printf 'args:%s\n' "$*"
`)
			inst := r.instance(t, []string{sh}, map[string]string{
				SettingResumeArgs:      `["--resume={session}"]`,
				SettingSessionIDRegex:  `session: ([a-z0-9-]+)`,
				SettingSessionIDStream: stream,
			})
			if _, err := runSync(t, inst, sessionRun(t, "s", "user", "q1")); err != nil {
				t.Fatalf("run 1: %v", err)
			}
			got, err := runSync(t, inst, sessionRun(t, "s", "user", "q2"))
			if err != nil {
				t.Fatalf("run 2: %v", err)
			}
			if got != "args:--resume=abc-123\n" {
				t.Fatalf("run 2 = %q", got)
			}
			if st := readStateFile(t, inst, "s"); st.UpstreamID != "abc-123" {
				t.Fatalf("state = %+v", st)
			}
		})
	}
}

func TestSessionNotEstablishedUntilSuccessAndCapture(t *testing.T) {
	r := newRig(t)
	count := filepath.Join(t.TempDir(), "count")
	// Run 1 fails; run 2 succeeds without printing an id; run 3 prints it.
	sh := script(t, `n=$(cat `+sq(count)+` 2>/dev/null || echo 0); n=$((n+1)); echo $n > `+sq(count)+`
printf 'args:%s\n' "$*"
[ $n -eq 1 ] && exit 1
[ $n -eq 3 ] && echo 'id=up-3'
exit 0
`)
	inst := r.instance(t, []string{sh}, map[string]string{
		SettingSessionArgs:    `["new"]`,
		SettingResumeArgs:     `["resume","{session}"]`,
		SettingSessionIDRegex: `id=(\S+)`,
	})
	for i, want := range []string{"args:new\n", "args:new\n", "args:new\nid=up-3\n", "args:resume up-3\n"} {
		got, err := runSync(t, inst, sessionRun(t, "s", "user", "q"))
		if i == 0 {
			if errCode(err) != adapter.CodeUpstream {
				t.Fatalf("run 1: err = %v, want upstream error", err)
			}
			continue
		}
		if err != nil || got != want {
			t.Fatalf("run %d = %q, %v; want %q", i+1, got, err, want)
		}
	}
}

func TestSessionIDValidation(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, "cat\n")}, nil)
	for _, sid := range []string{"a/b", `a\b`, ".", "..", "x\x00y", "tab\tid", strings.Repeat("x", maxSessionIDLen+1), "\xff"} {
		_, err := runSync(t, inst, sessionRun(t, sid, "user", "q"))
		if errCode(err) != adapter.CodeInvalidRequest {
			t.Errorf("session id %q: err = %v, want code %s", sid, err, adapter.CodeInvalidRequest)
		}
	}
	// Ids are encoded into one plain directory name.
	if name := sessionDirName("../x y:z"); strings.ContainsAny(name, "/.\\ :") {
		t.Errorf("dir name %q is not plain", name)
	}
}

// "{session}" becomes an argv element of its own. A session id is chosen by
// the API client (X-IOP-Session-Id), a captured one is printed by the CLI
// (its output can echo what the client asked for); neither may become an
// option of the CLI, say one that turns off its permission checks.
func TestSessionIDNeverBecomesAnOption(t *testing.T) {
	const evil = "--dangerously-skip-permissions"
	settings := map[string]string{SettingResumeArgs: `["--resume","{session}"]`}

	t.Run("client id", func(t *testing.T) {
		r := newRig(t)
		marker := filepath.Join(t.TempDir(), "ran")
		inst := r.instance(t, []string{script(t, "touch "+sq(marker)+"\n"+argsScript)}, settings)
		var errs []error
		for i := range 2 {
			got, err := runSync(t, inst, sessionRun(t, evil, "user", "q"))
			if strings.Contains(got, "--resume "+evil) {
				t.Fatalf("run %d: the session id became an option: %q", i+1, got)
			}
			errs = append(errs, err)
		}
		for i, err := range errs {
			if errCode(err) != adapter.CodeInvalidRequest {
				t.Errorf("run %d: err = %v, want code %s", i+1, err, adapter.CodeInvalidRequest)
			}
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Error("the CLI ran for a refused session id")
		}
	})

	t.Run("captured id", func(t *testing.T) {
		r := newRig(t)
		// Run 1 prints an option-like "session id"; no run may resume
		// with it.
		sh := script(t, `[ "$1" = new ] && echo 'session: `+evil+`'
printf 'args:%s\n' "$*"
`)
		settings := map[string]string{
			SettingSessionArgs:    `["new"]`,
			SettingResumeArgs:     `["--resume","{session}"]`,
			SettingSessionIDRegex: `session: (\S+)`,
		}
		inst := r.instance(t, []string{sh}, settings)
		for i := range 2 {
			got, err := runSync(t, inst, sessionRun(t, "s", "user", "q"))
			if err != nil {
				t.Fatalf("run %d: %v", i+1, err)
			}
			if strings.Contains(got, "args:--resume") {
				t.Fatalf("run %d: the captured id became an option: %q", i+1, got)
			}
		}
		if st := readStateFile(t, inst, "s"); st.UpstreamID != "" {
			t.Fatalf("state = %+v, want the option-like id refused", st)
		}
	})
}

func TestSessionUUID(t *testing.T) {
	u := sessionUUID("agent", "s-1", 0)
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !re.MatchString(u) {
		t.Fatalf("%q is not a version 5 UUID", u)
	}
	if u != sessionUUID("agent", "s-1", 0) {
		t.Fatal("not stable")
	}
	if u == sessionUUID("agent", "s-2", 0) || u == sessionUUID("other", "s-1", 0) {
		t.Fatal("not distinct")
	}
	if f := sessionUUID("agent", "s-1", 1); f == u || !re.MatchString(f) {
		t.Fatalf("after a failed start: %q (first %q)", f, u)
	}
	// Sessions persisted before failed starts were counted keep their id.
	if got := sessionUUID("agent", "s", 0); got != "0a5b75b9-bff0-53e1-8389-10af2a1b0b4a" {
		t.Fatalf("sessionUUID changed: %q", got)
	}
}

// modeScript sleeps (with a grandchild) when the prompt starts with "sleep",
// otherwise answers at once.
func modeScript(t *testing.T, pidFile string) string {
	return script(t, `read line
case "$line" in
sleep*)
	sleep 300 &
	echo $! > `+sq(pidFile)+`
	echo started
	wait;;
esac
echo done
`)
}

func TestTerminateSessionKillsAndRemovesState(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	inst := r.instance(t, []string{modeScript(t, pidFile)}, nil)

	if _, err := runSync(t, inst, sessionRun(t, "t-1", "user", "hello")); err != nil {
		t.Fatalf("run 1: %v", err)
	}
	dir := filepath.Join(inst.sessionsDir(), sessionDirName("t-1"))
	if _, err := os.Stat(filepath.Join(dir, stateFileName)); err != nil {
		t.Fatalf("no state after run 1: %v", err)
	}

	sink := newChanSink()
	done := runAsync(context.Background(), inst, sessionRun(t, "t-1", "user", "sleep please"), sink)
	recvDelta(t, sink)
	pid := readPID(t, pidFile)
	if got := inst.Sessions(); len(got) != 1 || got[0].ID != "t-1" || got[0].Running != 1 || got[0].Adapter != "agent" || got[0].LastUsedUnix == 0 {
		t.Fatalf("Sessions = %+v", got)
	}

	if err := inst.TerminateSession("t-1"); err != nil {
		t.Fatalf("TerminateSession: %v", err)
	}
	o := await(t, done)
	if errCode(o.err) != adapter.CodeUpstream {
		t.Fatalf("terminated run: err = %v", o.err)
	}
	eventually(t, "grandchild killed", func() bool { return processGone(pid) })
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state dir still there: %v", err)
	}
	if got := inst.Sessions(); len(got) != 0 {
		t.Fatalf("Sessions after terminate = %+v", got)
	}

	// The id can be used again, as a new session.
	if _, err := runSync(t, inst, sessionRun(t, "t-1", "user", "again")); err != nil {
		t.Fatalf("run after terminate: %v", err)
	}
	if st := readStateFile(t, inst, "t-1"); st.Runs != 1 {
		t.Fatalf("state after terminate = %+v, want a fresh session", st)
	}
}

func TestTerminateUnknownSession(t *testing.T) {
	inst := newRig(t).instance(t, []string{"true"}, nil)
	for _, id := range []string{"", "never-seen", "../../etc"} {
		if err := inst.TerminateSession(id); err != nil {
			t.Errorf("TerminateSession(%q) = %v", id, err)
		}
	}
}

func TestPersistedSessionsSurviveRestart(t *testing.T) {
	r := newRig(t)
	sh := script(t, argsScript)
	settings := map[string]string{SettingResumeArgs: `["--resume","{session}"]`}
	inst := r.instance(t, []string{sh}, settings)
	if _, err := runSync(t, inst, sessionRun(t, "keep", "user", "q")); err != nil {
		t.Fatal(err)
	}

	restarted := r.instance(t, []string{sh}, settings)
	if got := restarted.Sessions(); len(got) != 1 || got[0].ID != "keep" || got[0].Running != 0 {
		t.Fatalf("Sessions after restart = %+v", got)
	}
	got, err := runSync(t, restarted, sessionRun(t, "keep", "user", "q2"))
	if err != nil || !strings.HasPrefix(got, "args:--resume keep\n") {
		t.Fatalf("continuation after restart = %q, %v", got, err)
	}
	if err := restarted.TerminateSession("keep"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(restarted.sessionsDir()); len(entries) != 0 {
		t.Fatalf("sessions dir not empty: %v", entries)
	}
}

func TestSessionRunsAreSerialized(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// Overlapping runs would interleave their start and end lines.
	sh := script(t, `echo start >> `+sq(log)+`
sleep 0.2
echo end >> `+sq(log)+`
`)
	inst := r.instance(t, []string{sh}, nil)

	const n = 3
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		// Owner: this test, via wg.Wait; stops when the run returns.
		wg.Go(func() {
			_, err := inst.Run(context.Background(), sessionRun(t, "same", "user", "q"), newChanSink())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != strings.Repeat("start\nend\n", n) {
		t.Fatalf("log = %q: runs of one session overlapped", got)
	}
	if st := readStateFile(t, inst, "same"); st.Runs != n {
		t.Fatalf("state = %+v", st)
	}
}

func TestSessionWaitRespectsContext(t *testing.T) {
	r := newRig(t)
	goFile := filepath.Join(t.TempDir(), "go")
	sh := script(t, `echo started
while [ ! -e `+sq(goFile)+` ]; do sleep 0.02; done
`)
	inst := r.instance(t, []string{sh}, nil)

	sink := newChanSink()
	first := runAsync(context.Background(), inst, sessionRun(t, "busy", "user", "q"), sink)
	recvDelta(t, sink)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	o := await(t, runAsync(ctx, inst, sessionRun(t, "busy", "user", "q"), newChanSink()))
	if !errors.Is(o.err, context.DeadlineExceeded) {
		t.Fatalf("waiting run: err = %v, want deadline exceeded", o.err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("waiting run returned after %s", took)
	}

	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if o := await(t, first); o.err != nil {
		t.Fatalf("first run: %v", o.err)
	}
}

func TestCorruptStateStartsFresh(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, map[string]string{
		SettingSessionArgs: `["new"]`, SettingResumeArgs: `["resume"]`,
	})
	dir := filepath.Join(inst.sessionsDir(), sessionDirName("c"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := runSync(t, inst, sessionRun(t, "c", "user", "q"))
	if err != nil || !strings.HasPrefix(got, "args:new\n") {
		t.Fatalf("run = %q, %v", got, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		t.Fatal(err)
	}
	var st sessionState
	if err := json.Unmarshal(b, &st); err != nil || st.Runs != 1 {
		t.Fatalf("state = %s, %v", b, err)
	}
}
