package cli

import (
	"strings"
	"testing"
)

// A tail whose cut lands inside a multi-byte sequence starts at the next
// whole character: the error message built from it has no replacement
// character for bytes that were valid output.
func TestTailTextDropsSequenceCutAtStart(t *testing.T) {
	for _, tc := range []struct {
		limit      int
		write, out string
	}{
		{4, "x€yz", "yz"},  // "€" is 3 bytes: the cut keeps its last 2
		{5, "x€ yz", "yz"}, // …followed by white space, trimmed
		{2, "€€", ""},      // nothing whole is left
		{5, "x€yz", "€yz"}, // a cut just before it keeps it whole
	} {
		tb := newTailBuffer(tc.limit)
		tb.Write([]byte(tc.write))
		if got := tb.text(); got != tc.out {
			t.Errorf("limit %d, %q: text = %q, want %q", tc.limit, tc.write, got, tc.out)
		}
	}
}

// A captured session id becomes an argv element of later runs: one with
// white space or control characters in it, or longer than 256 bytes, is not
// taken.
func TestPlausibleIDRefusesSpaceAndControl(t *testing.T) {
	for id, want := range map[string]string{
		"abc-123":                "abc-123",
		"abc 123":                "",
		"abc\t123":               "",
		"abc\u00a0x":             "",
		"abc\x1b[31m":            "",
		"-rf":                    "",
		"":                       "",
		strings.Repeat("a", 256): strings.Repeat("a", 256),
		strings.Repeat("a", 257): "",
	} {
		if got := plausibleID(id); got != want {
			t.Errorf("plausibleID(%q) = %q, want %q", id, got, want)
		}
	}
}
