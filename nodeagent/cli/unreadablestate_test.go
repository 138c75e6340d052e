//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// writeTornState leaves session sid with a state file that cannot be
// read.
func writeTornState(t *testing.T, inst *instance, sid string) {
	t.Helper()
	dir := filepath.Join(inst.sessionsDir(), sessionDirName(sid))
	if err := os.MkdirAll(dir, stateDirPerm); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(`{"id":"to`), stateFilePerm); err != nil {
		t.Fatal(err)
	}
}

// A session directory whose state file cannot be read is kept on disk and
// counted against max_sessions as the least recently used: a new session
// over the bound evicts it first (nothing of it could be resumed), and the
// store holds no more session directories than the bound. It is not
// listed (nothing of it can be shown).
func TestUnreadableSessionStateCountsAgainstMaxSessions(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	old := sessionState{ID: "old", Runs: 1, CreatedUnix: 1, LastUsedUnix: 1}
	if err := writeState(filepath.Join(inst.sessionsDir(), sessionDirName("old")), &old); err != nil {
		t.Fatal(err)
	}
	writeTornState(t, inst, "torn")

	core, logs := observer.New(zap.WarnLevel)
	r.env.Logger = zap.New(core)
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	if got := listedSessions(fresh); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("listed %q, want [old] (the unreadable one is not listed)", got)
	}
	if n := logs.FilterMessage("cli: skip persisted session").Len(); n != 1 {
		t.Fatalf("%d warnings for the unreadable state, want 1", n)
	}
	// Two counted: a new session takes the place of the unreadable one.
	if got, err := runSync(t, fresh, sessionRun(t, "new", "user", "q")); err != nil || got != "args:new\nq" {
		t.Fatalf("run = %q, %v", got, err)
	}
	if got, want := storedSessions(t, fresh), []string{"new", "old"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q (at most max_sessions, the unreadable one evicted first)", got, want)
	}
	// Next the least recently used, "old".
	if got, err := runSync(t, fresh, sessionRun(t, "newer", "user", "q")); err != nil || got != "args:new\nq" {
		t.Fatalf("run = %q, %v", got, err)
	}
	if got, want := storedSessions(t, fresh), []string{"new", "newer"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// An unreadable session is terminated by id as a readable one is, and a
// run of its id starts it afresh and lists it from then on.
func TestUnreadableSessionStateIsTerminatedAndRestarted(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	writeTornState(t, inst, "gone")
	writeTornState(t, inst, "again")
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	if err := fresh.TerminateSession("gone"); err != nil {
		t.Fatal(err)
	}
	if got, want := storedSessions(t, fresh), []string{"again"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q after terminating, want %q", got, want)
	}
	if got, err := runSync(t, fresh, sessionRun(t, "again", "user", "q")); err != nil || got != "args:new\nq" {
		t.Fatalf("run = %q, %v; want a fresh session", got, err)
	}
	if got := listedSessions(fresh); !slices.Equal(got, []string{"again"}) {
		t.Fatalf("listed %q, want [again] once its state is written afresh", got)
	}
}
