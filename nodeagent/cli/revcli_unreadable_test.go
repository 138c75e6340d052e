//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A session whose state file is a directory cannot be read, nor written
// afresh by a run of its id (the state's rename onto it fails): after
// such a run it is still counted against max_sessions and still not
// listed, and the next new sessions over the bound evict it first,
// leaving no more session directories than the bound.
func TestUnwritableUnreadableSessionStaysCountedAndUnlisted(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	blocked := filepath.Join(inst.sessionsDir(), sessionDirName("blocked"), stateFileName)
	if err := os.MkdirAll(filepath.Join(blocked, "in-the-way"), stateDirPerm); err != nil {
		t.Fatal(err)
	}
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	// The CLI runs (afresh: nothing of the session could be read), but
	// its state cannot be saved.
	if got, err := runSync(t, fresh, sessionRun(t, "blocked", "user", "q")); err != nil || got != "args:new\nq" {
		t.Fatalf("run = %q, %v", got, err)
	}
	if got := listedSessions(fresh); len(got) != 0 {
		t.Fatalf("listed %q, want none (no state of it could be read or written)", got)
	}
	mustRun(t, fresh, "a")
	if got, want := storedSessions(t, fresh), []string{"a", "blocked"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	mustRun(t, fresh, "b")
	if got, want := storedSessions(t, fresh), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q (at most max_sessions, the unreadable one evicted)", got, want)
	}
}

// A session directory without a state file that holds more than the
// leftovers of a state write is no session: left alone on disk, not
// counted against max_sessions, and never evicted (removing it would
// take whatever else it holds).
func TestStatelessDirWithOtherContentIsNeitherCountedNorEvicted(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(1))
	keep := filepath.Join(inst.sessionsDir(), sessionDirName("other"), "keep")
	if err := os.MkdirAll(keep, stateDirPerm); err != nil {
		t.Fatal(err)
	}
	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(1))
	mustRun(t, fresh, "a")
	mustRun(t, fresh, "b")
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the directory without state was removed: %v", err)
	}
	if got, want := storedSessions(t, fresh), []string{"b", "other"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}
