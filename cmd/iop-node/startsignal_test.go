package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
	"github.com/iop-gateway/iop/internal/testproc"
)

// caPEM is a throwaway CA certificate, in PEM.
func caPEM(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testcert.NewCA(t, t.TempDir(), "test-ca").File)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A SIGTERM that arrives while the node is still starting (here: reading
// its CA file, a FIFO the test holds) is not fatal: the node finishes
// starting, then stops with exit 0, as after any local shutdown.
func TestSIGTERMDuringStartExit0(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	cfg := writeConfig(t, "edge:\n  address: "+closedAddr(t)+"\n  tls:\n    enabled: true\n    ca_file: "+ca+
		"\nnode:\n  id: n1\n  token: tok\nreconnect:\n  interval_sec: 0.05\n  max_attempts: 0\n"+
		"store_dir: "+dir+"/store\nworkspace_root: "+dir+"/ws\n")
	cmd := exec.Command(binary, "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Held while it reads its CA file: past where it takes its signals.
	w, done := testproc.HoldStart(t, cmd, ca)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(caPEM(t))
	_ = w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM during start-up: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no exit after SIGTERM during start-up:\n%s", out.String())
	}
}

// A start-up that hangs (its CA file never reads to the end) still yields
// to signals: the first asks for a clean stop, the next kills at once.
func TestSecondSignalKillsHungStart(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	cfg := writeConfig(t, "edge:\n  address: "+closedAddr(t)+"\n  tls:\n    enabled: true\n    ca_file: "+ca+
		"\nnode:\n  id: n1\n  token: tok\nstore_dir: "+dir+"/store\nworkspace_root: "+dir+"/ws\n")
	cmd := exec.Command(binary, "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	w, done := testproc.HoldStart(t, cmd, ca) // held open, never written
	defer w.Close()
	// Signals until the process is gone: the first is taken for a clean
	// stop, a later one (once the first was handled) kills.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
				t.Fatalf("exit %v, want killed by SIGTERM", err)
			}
			return
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("a hung start-up ignored repeated SIGTERMs")
		case <-tick.C:
		}
	}
}
