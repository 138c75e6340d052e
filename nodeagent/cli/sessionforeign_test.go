//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A state file that names another session (copied, or left by a bug) does
// not make this session resume that one's CLI session: the run starts the
// session afresh.
func TestForeignSessionStateIsNotResumed(t *testing.T) {
	r := newRig(t)
	sh := script(t, "cat >/dev/null\necho \"$@\"\n")
	inst := r.instance(t, []string{sh}, map[string]string{
		SettingSessionArgs: `["--new","{session}"]`,
		SettingResumeArgs:  `["--resume","{session}"]`,
	})
	dir := filepath.Join(inst.sessionsDir(), sessionDirName("mine"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	state := `{"id":"theirs","upstream_id":"their-cli-session","runs":3,"created_unix":1,"last_used_unix":1}`
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := runSync(t, inst, sessionRun(t, "mine", "user", "hi"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got = strings.TrimSpace(got); got != "--new mine" {
		t.Fatalf("CLI arguments %q, want %q (a fresh session)", got, "--new mine")
	}
}
