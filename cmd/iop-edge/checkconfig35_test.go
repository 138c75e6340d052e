package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --check-config loads the node listener's key pair as the start does: a
// cert_file that does not exist is a problem naming the key, exit 2, where
// it used to print "ok" for a config the edge then failed to start with.
func TestCheckConfigLoadsTLSFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "edge.yaml")
	missing := filepath.Join(dir, "missing.pem")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("listen: {http: %q, node: %q, tls: {cert_file: %q, key_file: %q}}\n",
		freeAddr(t), freeAddr(t), missing, missing)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--check-config", cfgFile).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("--check-config with a missing cert_file: %v, want exit 2\n%s", err, out)
	}
	if want := "listen.tls.cert_file: " + fmt.Sprintf("%q", missing) + " does not exist"; !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if strings.Contains(string(out), "goroutine ") {
		t.Errorf("a stack trace:\n%s", out)
	}
}
