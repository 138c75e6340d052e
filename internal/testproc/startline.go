package testproc

import (
	"strings"
	"testing"
)

// OneStartLine checks the output of a command whose start failed: exactly
// one line logged at error, "cannot start", naming every one of wants
// (a key, a path, a field), and nothing else logged at error.
func OneStartLine(t testing.TB, out string, wants ...string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, `"level":"error"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg":"cannot start"`) {
		t.Fatalf("want one error line \"cannot start\", got:\n%s", out)
	}
	for _, w := range wants {
		if !strings.Contains(lines[0], w) {
			t.Errorf("the line lacks %s:\n%s", w, lines[0])
		}
	}
}
