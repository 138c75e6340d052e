package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testproc"
)

// orphanCLIEnv tells TestOrphanCLIStarter which pid to give: "cli" (the
// CLI, started without its guard) or "child" (the CLI's child).
const orphanCLIEnv = "IOP_CLI_ORPHAN"

// A Node killed without stopping its runs (SIGKILL, the OOM killer; here
// the test process running the adapter) takes its CLI with it by the
// CLI's parent-death signal alone, the group's guard left out.
func TestCLIDiesWithAKilledNodeWithoutItsGuard(t *testing.T) {
	testproc.DiesWithParent(t, "TestOrphanCLIStarter", "the CLI", time.Minute, func() []string {
		return []string{orphanCLIEnv + "=cli"}
	})
}

// What the CLI started (a child in its process group, which no
// parent-death signal reaches) dies with the killed Node too: the
// group's guard kills the group.
func TestCLIChildDiesWithAKilledNode(t *testing.T) {
	testproc.DiesWithParent(t, "TestOrphanCLIStarter", "the CLI's child", time.Minute, func() []string {
		return []string{orphanCLIEnv + "=child"}
	})
}

// TestOrphanCLIStarter runs only re-executed by the two tests above: it
// runs a CLI that starts a child, gives the pid asked for and waits to be
// killed.
func TestOrphanCLIStarter(t *testing.T) {
	dir := testproc.StarterDir(t, "TestCLIDiesWithAKilledNodeWithoutItsGuard")
	which := os.Getenv(orphanCLIEnv)
	guardDisabled = which == "cli"
	cliPID, childPID := filepath.Join(dir, "cli.pid"), filepath.Join(dir, "child.pid")
	// Without its guard, the CLI starts no child: nothing would stop it.
	body := "echo $$ > " + sq(cliPID) + "\nexec sleep 600\n"
	if which == "child" {
		body = "sleep 600 &\necho $! > " + sq(childPID) + "\n" + body
	}
	// SIGTERM ignored (through exec too): only a SIGKILL ends them.
	body = "trap '' TERM\n" + body
	inst := newRig(t).instance(t, []string{script(t, body)}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, inst, userRun(t, "x"), newChanSink())
	pid := readPID(t, cliPID)
	if which == "child" {
		pid = readPID(t, childPID)
	}
	testproc.StarterStarted(t, pid, func() { cancel(); await(t, done) })
}
