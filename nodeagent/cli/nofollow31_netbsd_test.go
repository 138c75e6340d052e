package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// NetBSD refuses an O_NOFOLLOW open of a symlink with EFTYPE: it is the
// state file replaced by a symlink, not a plain open error.
func TestNoFollowRefusalNetBSD(t *testing.T) {
	if !isNoFollowRefusal(&fs.PathError{Op: "open", Path: "state.json", Err: syscall.EFTYPE}) {
		t.Fatal("EFTYPE is not read as the O_NOFOLLOW refusal")
	}
	if isNoFollowRefusal(fmt.Errorf("open: %w", syscall.EACCES)) {
		t.Fatal("EACCES read as the O_NOFOLLOW refusal")
	}
	// And the system does answer EFTYPE.
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := os.OpenFile(link, os.O_RDONLY|oNoFollow, 0)
	if !errors.Is(err, syscall.EFTYPE) || !isNoFollowRefusal(err) {
		t.Fatalf("open of a symlink with O_NOFOLLOW: %v, want EFTYPE", err)
	}
}
