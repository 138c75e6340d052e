package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testproc"
)

// A test process that dies without running its cleanups (SIGKILL, a
// -timeout panic) takes the iop-edge it started with it: only its
// parent-death signal (gatewayProcAttr) can stop it then.
func TestEdgeDiesWithTheTestProcessThatStartedIt(t *testing.T) {
	testproc.DiesWithParent(t, "TestOrphanEdgeStarter", "iop-edge", time.Minute, func() []string {
		return []string{"IOP_EDGE_ORPHAN_BIN=" + buildEdge(t)}
	})
}

// TestOrphanEdgeStarter runs only re-executed by
// TestEdgeDiesWithTheTestProcessThatStartedIt: it starts iop-edge as the
// tests do, gives its pid and waits to be killed.
func TestOrphanEdgeStarter(t *testing.T) {
	dir := testproc.StarterDir(t, "TestEdgeDiesWithTheTestProcessThatStartedIt")
	httpAddr := freeAddr(t)
	cfg := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: {http: %q, node: %q}
log: {level: info}
nodes:
  - id: a
    token: secret-a
    providers: [{name: m, type: mock, capacity: 1}]
models:
  - name: echo
    providers: [{node: a, provider: m, target: echo}]
`, httpAddr, freeAddr(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Getenv("IOP_EDGE_ORPHAN_BIN"), "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	logName := filepath.Join(dir, "edge.log")
	stop := testproc.StartLogged(t, cmd, logName)
	// Running, past its start-up: it serves.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(20 * time.Second)
	for !healthy(client, httpAddr) {
		if time.Now().After(deadline) {
			stop()
			b, _ := os.ReadFile(logName)
			t.Fatalf("edge never became healthy:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	testproc.StarterStarted(t, cmd.Process.Pid, stop)
}
