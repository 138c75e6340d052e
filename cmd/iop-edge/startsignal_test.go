package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
	"github.com/iop-gateway/iop/internal/testproc"
)

// A SIGTERM that arrives while the edge is still starting (here: reading
// its node-listener certificate, a FIFO the test holds) is not fatal: the
// edge comes up, then shuts down with exit 0.
func TestSIGTERMDuringStartExits0(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	issuedCert, issuedKey := testcert.NewCA(t, t.TempDir(), "edge").Issue(t, "edge", true)
	testcert.InstallAt(t, keyFile, issuedKey, time.Now())
	certPEM, err := os.ReadFile(issuedCert)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("listen: {http: %q, node: %q, tls: {cert_file: %q, key_file: %q}}\n",
		freeAddr(t), freeAddr(t), certFile, keyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command(bin, "--config", cfgFile)
	cmd.SysProcAttr = gatewayProcAttr()
	cmd.Stdout, cmd.Stderr = &out, &out
	// Held while it reads its certificate: past where it takes its signals.
	w, done := testproc.HoldStart(t, cmd, certFile)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(certPEM)
	_ = w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM during start-up: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no exit after SIGTERM during start-up:\n%s", out.String())
	}
}
