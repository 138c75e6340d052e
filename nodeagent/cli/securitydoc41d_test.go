package cli

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// SECURITY.md and README.md give the cli settings' defaults and bounds;
// this holds them to what parseConfig applies and accepts.
func TestSecurityDocCLISettings(t *testing.T) {
	sec, err := os.ReadFile("../../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig(&iop.AdapterConfig{Command: []string{"claude", "-p"}})
	if err != nil {
		t.Fatal(err)
	}
	// Line breaks count as spaces: a sentence may wrap inside a value.
	docs := map[string]string{
		"SECURITY.md": strings.ReplaceAll(string(sec), "\n", " "),
		"README.md":   strings.ReplaceAll(string(readme), "\n", " "),
	}
	num := func(s string) int {
		n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return n
	}
	for _, tc := range []struct {
		doc     string
		pattern string
		check   func(m []string) (doc, code []int)
	}{
		{"SECURITY.md", "`max_sessions` \\(([0-9,]+); ([0-9,]+)–([0-9,]+)\\)", func(m []string) ([]int, []int) {
			return []int{num(m[1]), num(m[2]), num(m[3])}, []int{c.maxSessions, 1, maxMaxSessions}
		}},
		{"README.md", "`max_sessions` of them \\(a cli setting: default ([0-9,]+), ([0-9,]+)–([0-9,]+),", func(m []string) ([]int, []int) {
			return []int{num(m[1]), num(m[2]), num(m[3])}, []int{c.maxSessions, 1, maxMaxSessions}
		}},
		{"SECURITY.md", "`max_stderr_bytes` \\(([0-9]+) KiB, at most ([0-9]+) MiB\\)", func(m []string) ([]int, []int) {
			return []int{num(m[1]) << 10, num(m[2]) << 20}, []int{c.maxStderr, maxMaxStderrBytes}
		}},
		{"SECURITY.md", "`kill_grace_ms`: ([0-9]+) s, at most ([0-9]+) min\\)", func(m []string) ([]int, []int) {
			return []int{num(m[1]), num(m[2])}, []int{int(c.killGrace / time.Second), int(maxKillGrace / time.Minute)}
		}},
	} {
		m := regexp.MustCompile(tc.pattern).FindStringSubmatch(docs[tc.doc])
		if m == nil {
			t.Errorf("%s: no %s", tc.doc, tc.pattern)
			continue
		}
		doc, code := tc.check(m)
		for i := range doc {
			if doc[i] != code[i] {
				t.Errorf("%s: %q says %d where the cli adapter has %d", tc.doc, m[0], doc[i], code[i])
			}
		}
	}
}
