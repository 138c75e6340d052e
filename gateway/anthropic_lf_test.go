package gateway

import (
	"strings"
	"testing"
)

// appendLF, fed a text in any two pieces, makes the same LF-only text as
// replacing CRLF and then lone CRs at once.
func TestAppendLFAnySplit(t *testing.T) {
	for _, text := range []string{"", "a", "\r", "\n", "\r\n", "\n\r", "a\r\nb\rc\nd", "data: x\r\n\r\ndata: y\r\r", "\r\r\n\n\r"} {
		want := strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
		for i := 0; i <= len(text); i++ {
			var cr bool
			got := appendLF(appendLF(nil, []byte(text[:i]), &cr), []byte(text[i:]), &cr)
			if string(got) != want {
				t.Errorf("appendLF(%q | %q) = %q, want %q", text[:i], text[i:], got, want)
			}
		}
	}
}
