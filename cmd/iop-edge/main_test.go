package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckConfigExitCodes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "iop-edge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	good, err := filepath.Abs("../../configs/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command(bin, "--check-config", good)
	check.SysProcAttr = gatewayProcAttr()
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("configs/edge.yaml: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte(`
listen: {http: "nope"}
nodes:
  - id: a
    providers: [{name: p, type: "Tele Port", capacity: -1}]
models:
  - name: m
    providers: [{node: b, provider: p}]
`), 0o600)
	check = exec.Command(bin, "--check-config", bad)
	check.SysProcAttr = gatewayProcAttr()
	out, err := check.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("bad config: %v, want exit 2\n%s", err, out)
	}
	for _, want := range []string{"listen.http", "token", "type \"Tele Port\" is not a lowercase identifier", "capacity must be positive", "not a configured node", "target is required"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
