package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testproc"
)

// A test process that dies without running its cleanups (SIGKILL, a
// -timeout panic) takes the iop-node it started with it: only its
// parent-death signal (gatewayProcAttr) can stop it then.
func TestNodeDiesWithTheTestProcessThatStartedIt(t *testing.T) {
	// Two minutes to start: the re-executed process builds iop-node first
	// (TestMain).
	testproc.DiesWithParent(t, "TestOrphanNodeStarter", "iop-node", 2*time.Minute, func() []string {
		return []string{"IOP_NODE_ORPHAN_BIN=" + binary}
	})
}

// TestOrphanNodeStarter runs only re-executed by
// TestNodeDiesWithTheTestProcessThatStartedIt: it starts iop-node as the
// tests do, gives its pid and waits to be killed.
func TestOrphanNodeStarter(t *testing.T) {
	dir := testproc.StarterDir(t, "TestNodeDiesWithTheTestProcessThatStartedIt")
	cfg := nodeConfig(t, closedAddr(t), "tok", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\n")
	cmd := exec.Command(os.Getenv("IOP_NODE_ORPHAN_BIN"), "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	logName := filepath.Join(dir, "node.log")
	stop := testproc.StartLogged(t, cmd, logName)
	// Running, past its start-up: it has tried the (closed) edge.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(logName)
		if strings.Contains(string(b), "edge connect attempt failed") {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no attempt logged:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	testproc.StarterStarted(t, cmd.Process.Pid, stop)
}
