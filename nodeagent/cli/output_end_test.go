//go:build unix

package cli

import "testing"

// Output that ends inside a multi-byte sequence is not lost: the bytes
// held back for the rest of the sequence go out, replaced, at EOF.
func TestRunFlushesIncompleteSequenceAtEnd(t *testing.T) {
	r := newRig(t)
	sh := script(t, `printf 'abc\342\202'`+"\n")
	inst := r.instance(t, []string{sh}, nil)
	out, err := runSync(t, inst, userRun(t, "x"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := "abc\uFFFD"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
}
