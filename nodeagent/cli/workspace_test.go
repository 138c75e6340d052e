//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

func TestResolveWorkspace(t *testing.T) {
	r := newRig(t)
	root := r.realRoot(t)
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "real/dir"), 0o750))
	must(os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "alias")))
	must(os.Symlink(outside, filepath.Join(root, "out")))
	must(os.Symlink("../..", filepath.Join(root, "real/up")))
	must(os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "dangling")))
	must(os.WriteFile(filepath.Join(root, "file"), nil, 0o600))

	for ws, want := range map[string]string{
		"":              root,
		".":             root,
		"real/dir":      filepath.Join(root, "real/dir"),
		"alias/dir":     filepath.Join(root, "real/dir"),
		"alias/new/sub": filepath.Join(root, "real/new/sub"),
	} {
		got, err := resolveWorkspace(r.root, ws)
		if err != nil || got != want {
			t.Errorf("resolveWorkspace(%q) = %q, %v; want %q", ws, got, err, want)
		}
	}

	for _, ws := range []string{
		"/abs", outside, "..", "../x", "a/../../b", "real/..", "out", "out/sub", "real/up", "real/up/x",
		"dangling", "file", "file/sub", "nul\x00byte",
	} {
		_, err := resolveWorkspace(r.root, ws)
		if errCode(err) != adapter.CodeInvalidRequest {
			t.Errorf("resolveWorkspace(%q): err = %v, want code %s", ws, err, adapter.CodeInvalidRequest)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("created outside the root: %v", entries)
	}
	if _, err := os.Lstat(filepath.Join(root, "nowhere")); !os.IsNotExist(err) {
		t.Fatal("dangling symlink target was created")
	}
}

func TestWorkspaceRootCreated(t *testing.T) {
	r := newRig(t)
	got, err := resolveWorkspace(r.root, "p")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
		t.Fatalf("%s not created: %v", got, err)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		root, path string
		want       bool
	}{
		{"/r", "/r", true},
		{"/r", "/r/a", true},
		{"/r", "/ra", false},
		{"/r", "/", false},
		{"/r", "/r/..a", true},
		{"/", "/x", true},
	} {
		if got := within(tc.root, tc.path); got != tc.want {
			t.Errorf("within(%q, %q) = %v", tc.root, tc.path, got)
		}
	}
}
