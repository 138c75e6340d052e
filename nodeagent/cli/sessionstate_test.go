//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// claudeLike behaves as claude does with session ids: --session-id refuses
// an id whose transcript exists, and the transcript is written as soon as
// the run starts, before the answer (which fails for a prompt "fail").
// --resume needs the transcript.
func claudeLike(t *testing.T) string {
	store := t.TempDir()
	return script(t, `prompt=$(cat)
case "$1" in
--session-id)
  if [ -e `+sq(store)+`/"$2" ]; then echo "Error: Session ID $2 is already in use." >&2; exit 1; fi
  : > `+sq(store)+`/"$2"
  [ "$prompt" = fail ] && { echo "API Error: overloaded" >&2; exit 1; }
  echo "new $2";;
--resume)
  if [ ! -e `+sq(store)+`/"$2" ]; then echo "No conversation found with session ID: $2" >&2; exit 1; fi
  echo "resumed $2";;
esac
`)
}

// A first run that fails after the CLI registered the session id it was
// given must not make every later run of the session fail with that id
// "already in use".
func TestSessionFirstRunFailureDoesNotReuseSessionUUID(t *testing.T) {
	r := newRig(t)
	command := []string{claudeLike(t)}
	settings := map[string]string{
		SettingSessionArgs: `["--session-id","{session_uuid}"]`,
		SettingResumeArgs:  `["--resume","{session_uuid}"]`,
	}
	inst := r.instance(t, command, settings)
	if _, err := runSync(t, inst, sessionRun(t, "s", "user", "fail")); errCode(err) != adapter.CodeUpstream {
		t.Fatalf("run 1: err = %v, want upstream error", err)
	}
	got, err := runSync(t, inst, sessionRun(t, "s", "user", "hello"))
	if err != nil {
		t.Fatalf("run 2: %v", err)
	}
	uuid, ok := strings.CutPrefix(strings.TrimSpace(got), "new ")
	if !ok || uuid == sessionUUID("agent", "s", 0) {
		t.Fatalf("run 2 = %q, want a new session other than the failed run's", got)
	}
	// Later runs resume the session the successful run created.
	got, err = runSync(t, inst, sessionRun(t, "s", "user", "hello", "assistant", got, "user", "again"))
	if err != nil || got != "resumed "+uuid+"\n" {
		t.Fatalf("run 3 = %q, %v; want resumed %s", got, err, uuid)
	}
	// And so does a Node restarted since.
	got, err = runSync(t, r.instance(t, command, settings), sessionRun(t, "s", "user", "and again"))
	if err != nil || got != "resumed "+uuid+"\n" {
		t.Fatalf("run after restart = %q, %v; want resumed %s", got, err, uuid)
	}
}

// A session state written by an earlier version, before captured ids were
// checked, may hold an option-like id: it must not reach the CLI's argv.
func TestPersistedOptionLikeIDIsNotResumed(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, map[string]string{
		SettingSessionArgs:    `["new"]`,
		SettingResumeArgs:     `["--resume","{session}"]`,
		SettingSessionIDRegex: `session: (\S+)`,
	})
	st := sessionState{ID: "s", UpstreamID: "--dangerously-skip-permissions", Runs: 1}
	if err := writeState(filepath.Join(inst.sessionsDir(), sessionDirName("s")), &st); err != nil {
		t.Fatal(err)
	}
	got, err := runSync(t, inst, sessionRun(t, "s", "user", "q"))
	if err != nil || got != "args:new\nq" {
		t.Fatalf("run = %q, %v; want a fresh session", got, err)
	}
}

// Building an instance reads none of the persisted sessions: a refresh
// builds one to validate a changed config while holding the agent's lock.
// They are read on first use.
func TestNewReadsNoPersistedSessions(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{"true"}, nil)
	st := sessionState{ID: "kept", Runs: 1}
	if err := writeState(filepath.Join(inst.sessionsDir(), sessionDirName("kept")), &st); err != nil {
		t.Fatal(err)
	}
	// An entry whose state cannot be read: reading it logs a warning.
	torn := filepath.Join(inst.sessionsDir(), sessionDirName("torn"))
	if err := os.MkdirAll(torn, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(torn, stateFileName), []byte(`{"id":"to`), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	r.env.Logger = zap.New(core)
	fresh := r.instance(t, []string{"true"}, nil)
	if n := logs.FilterMessage("cli: skip persisted session").Len(); n != 0 {
		t.Fatalf("New read the persisted sessions (%d warnings)", n)
	}
	if got := fresh.Sessions(); len(got) != 1 || got[0].ID != "kept" {
		t.Fatalf("Sessions = %+v, want the persisted one", got)
	}
	if n := logs.FilterMessage("cli: skip persisted session").Len(); n != 1 {
		t.Fatalf("%d warnings for the unreadable entry, want 1", n)
	}
}
