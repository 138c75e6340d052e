package cli

import (
	"os"
	"testing"
)

// A read that fails part way is an error, not a state of the bytes read
// so far: /proc/self/mem is a regular file whose first page is not
// mapped, so its read fails (EIO) after a successful open.
func TestStateReadErrorIsReported(t *testing.T) {
	const mem = "/proc/self/mem"
	if fi, err := os.Lstat(mem); err != nil || !fi.Mode().IsRegular() {
		t.Skipf("%s is no regular file here (%v)", mem, err)
	}
	if b, err := readStateBytes(mem); err == nil {
		t.Fatalf("readStateBytes(%s) = %d bytes, nil error; want the read's error", mem, len(b))
	}
}
