package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
	if err := syscall.Mkfifo(certFile, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edge"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("listen: {http: %q, node: %q, tls: {cert_file: %q, key_file: %q}}\n",
		freeAddr(t), freeAddr(t), certFile, keyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command(bin, "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// Owner: the test; ends when the process exits (killed on failure).
	go func() { done <- cmd.Wait() }()
	// Opening the FIFO for writing returns once the edge has opened it for
	// reading: it is mid-start-up, past where it takes its signals.
	w, err := os.OpenFile(certFile, os.O_WRONLY, 0)
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
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
