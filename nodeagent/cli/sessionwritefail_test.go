//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// pathMax is Linux's PATH_MAX, the terminating NUL included.
const pathMax = 4096

// storeWhereStateCannotBeWritten points r's store at a directory so deep
// that the state directory of session sid can be created but no file in
// it can (its path is over PATH_MAX): the state write fails after it
// created the directory, whoever runs the test (root included).
func storeWhereStateCannotBeWritten(t *testing.T, r *rig, sid string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The state dir is store/cli/agent/sessions/<name>; a temporary state
	// file in it adds "/state.json." and at least one digit.
	suffix := len("/cli/agent/sessions/") + len(sessionDirName(sid))
	storeLen := pathMax - 8 - suffix // the state dir's path: PATH_MAX-8 bytes
	var b strings.Builder
	b.WriteString(base)
	for b.Len() < storeLen {
		n := storeLen - b.Len() - 1 // the last component
		if n > 200 {
			n = min(200, n-2) // leaves at least "/d" for the next
		}
		b.WriteByte('/')
		b.WriteString(strings.Repeat("d", n))
	}
	if b.Len() != storeLen || strings.HasSuffix(b.String(), "/") {
		t.Fatalf("cannot build a store path of %d bytes under %s", storeLen, base)
	}
	r.store = b.String()
	r.env.StoreDir = r.store
}

// A state write that fails leaves no session directory behind: one would
// be skipped at the next start, counted against nothing, so that a
// failing disk could fill the store with them beyond max_sessions.
func TestFailedStateWriteLeavesNoSessionDir(t *testing.T) {
	r := newRig(t)
	storeWhereStateCannotBeWritten(t, r, "s")
	core, logs := observer.New(zap.WarnLevel)
	r.env.Logger = zap.New(core)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	if got := mustRun(t, inst, "s"); got != "args:new\nq" {
		t.Fatalf("run = %q, want the answer (only continuation suffers)", got)
	}
	if n := logs.FilterMessage("cli: save session state").Len(); n != 1 {
		t.Fatalf("%d failed state writes logged, want 1 (the test's premise)", n)
	}
	if got := storedSessions(t, inst); len(got) != 0 {
		t.Fatalf("stored %q after the failed write, want nothing", got)
	}
	if got := listedSessions(inst); len(got) != 0 {
		t.Fatalf("listed %q, want nothing", got)
	}
}

// A failed write removes only the directory it created: the state
// directory of a session that was there before is kept with what it
// holds, and so is a file standing where the directory would be.
func TestFailedStateWriteKeepsWhatItDidNotCreate(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(4))
	mustRun(t, inst, "kept")
	// state.json becomes a non-empty directory: the rename of the next
	// write onto it fails.
	dir := filepath.Join(inst.sessionsDir(), sessionDirName("kept"))
	state := filepath.Join(dir, stateFileName)
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A file where session "file"'s directory would be.
	inTheWay := filepath.Join(inst.sessionsDir(), sessionDirName("file"))
	if err := os.WriteFile(inTheWay, []byte("not a dir"), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	inst.log = zap.New(core)
	mustRun(t, inst, "kept")
	mustRun(t, inst, "file")
	if n := logs.FilterMessage("cli: save session state").Len(); n != 2 {
		t.Fatalf("%d failed state writes logged, want 2 (the test's premise)", n)
	}
	if _, err := os.Stat(filepath.Join(state, "x")); err != nil {
		t.Fatalf("the earlier session's directory lost its content: %v", err)
	}
	if b, err := os.ReadFile(inTheWay); err != nil || string(b) != "not a dir" {
		t.Fatalf("the file in the way = %q, %v; want it untouched", b, err)
	}
}

// Session directories without state (left by a write that failed, or by
// a crash between creating one and renaming its state into it) are
// removed at load: they hold no session, a run of their id starts afresh
// anyway, and nothing else would ever remove them. Directories with state
// the node cannot read are kept, as is anything else.
func TestLoadRemovesSessionDirsWithoutState(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	for _, sid := range []string{"a", "b"} {
		st := sessionState{ID: sid, Runs: 1, LastUsedUnix: 1}
		if err := writeState(filepath.Join(inst.sessionsDir(), sessionDirName(sid)), &st); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(sid string) string {
		dir := filepath.Join(inst.sessionsDir(), sessionDirName(sid))
		if err := os.Mkdir(dir, stateDirPerm); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, sid := range []string{"empty-1", "empty-2", "empty-3"} {
		mkdir(sid)
	}
	write := func(dir, name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), stateFilePerm); err != nil {
			t.Fatal(err)
		}
	}
	write(mkdir("temp-only"), stateFileName+".123456", `{"id":"temp-only"`)
	write(mkdir("torn"), stateFileName, `{"id":"to`)
	write(mkdir("foreign"), "notes.txt", "someone's")

	core, logs := observer.New(zap.InfoLevel)
	r.env.Logger = zap.New(core)
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	if got, want := listedSessions(fresh), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if got, want := storedSessions(t, fresh), []string{"a", "b", "foreign", "torn"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q after load, want %q", got, want)
	}
	if n := logs.FilterMessage("cli: removed session directories without state").Len(); n != 1 {
		t.Fatalf("removal logged %d times, want once", n)
	}
}
