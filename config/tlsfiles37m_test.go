package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// A key_file pointed at something huge (a disk image, a log) costs
// --check-config at most maxCheckFile of memory, not the file's size: the
// file is refused having read one byte past the bound. A 256 MiB (sparse)
// file is refused with under 64 MiB allocated, where reading it whole
// allocated more than its size before refusing it just the same.
func TestCheckFileReadIsBounded37m(t *testing.T) {
	huge := filepath.Join(t.TempDir(), "huge.pem")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 256 << 20
	if err := os.Truncate(huge, size); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readCheckFile(huge)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errTooLarge) {
		t.Fatalf("readCheckFile of a %d MiB file: %v, want errTooLarge", size>>20, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("refusing a %d MiB file allocated %d MiB; want at most 64 (the bound is %d MiB)", size>>20, got>>20, maxCheckFile>>20)
	}
}

// A TLS file the process may not read says so in words, with its path:
// "cannot be read (permission denied)", not the errno's text after
// "cannot be read:". Built from the error os.Open returns for it, as a
// test running as root cannot be denied a file.
func TestCheckFilePermissionDeniedInWords37m(t *testing.T) {
	err := &fs.PathError{Op: "open", Path: "/etc/iop/key.pem", Err: syscall.EACCES}
	if got, want := fileErr(err), `"/etc/iop/key.pem" cannot be read (permission denied)`; got != want {
		t.Errorf("fileErr(EACCES) = %q, want %q", got, want)
	}
}
