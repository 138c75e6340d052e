//go:build unix

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Loading removes a session directory without state only when it holds
// nothing but temporary files of state writes, at most
// maxStatelessEntries of them, and never follows a symbolic link: not one
// named like a temporary file, nor a session directory that is one.
func TestLoadRemovesOnlyPlainStatelessDirs(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(4))
	dirOf := func(sid string) string { return filepath.Join(inst.sessionsDir(), sessionDirName(sid)) }
	if err := os.MkdirAll(inst.sessionsDir(), stateDirPerm); err != nil {
		t.Fatal(err)
	}
	withTemps := func(sid string, n int) {
		dir := dirOf(sid)
		if err := os.Mkdir(dir, stateDirPerm); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s.%d", stateFileName, i)), nil, stateFilePerm); err != nil {
				t.Fatal(err)
			}
		}
	}
	withTemps("at-bound", maxStatelessEntries)
	withTemps("over-bound", maxStatelessEntries+1)

	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	withTemps("link-inside", 0)
	if err := os.Symlink(victim, filepath.Join(dirOf("link-inside"), stateFileName+".1")); err != nil {
		t.Fatal(err)
	}
	withTemps("subdir-inside", 0)
	if err := os.Mkdir(filepath.Join(dirOf("subdir-inside"), stateFileName+".d"), stateDirPerm); err != nil {
		t.Fatal(err)
	}
	linkedDir := filepath.Join(outside, "linked")
	if err := os.Mkdir(linkedDir, stateDirPerm); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(linkedDir, stateFileName+".1"), nil, stateFilePerm); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linkedDir, dirOf("linked-dir")); err != nil {
		t.Fatal(err)
	}

	fresh := r.instance(t, []string{script(t, argsScript)}, boundSettings(4))
	if got := listedSessions(fresh); len(got) != 0 {
		t.Fatalf("listed %q, want none", got)
	}
	if got, want := storedSessions(t, fresh), []string{"link-inside", "linked-dir", "over-bound", "subdir-inside"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q after load, want %q", got, want)
	}
	if left, err := os.ReadDir(dirOf("over-bound")); err != nil || len(left) != maxStatelessEntries+1 {
		t.Fatalf("a directory over the bound holds %d entries (%v), want all %d kept", len(left), err, maxStatelessEntries+1)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Fatalf("file a link pointed at: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(linkedDir, stateFileName+".1")); err != nil {
		t.Fatalf("directory a link pointed at lost its file: %v", err)
	}
}
