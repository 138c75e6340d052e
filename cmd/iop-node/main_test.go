package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// The exit-code contract is checked on the built binary: 0 after
// SIGINT/SIGTERM, 1 for a rejected credential or an exhausted finite budget
// (and bad config), 2 from --check-config on a bad config.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iop-node-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "iop-node")
	out, err := exec.Command("go", "build", "-tags", "iopnode_testhooks", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func nodeConfig(t *testing.T, addr, token, reconnect string) string {
	dir := t.TempDir()
	return writeConfig(t, "edge:\n  address: "+addr+"\nnode:\n  id: n1\n  token: "+token+"\n"+reconnect+
		"store_dir: "+dir+"/store\nworkspace_root: "+dir+"/ws\nlog:\n  level: debug\n")
}

func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runNode runs the binary to completion (bounded) and returns exit code and
// combined output.
func runNode(t *testing.T, timeout time.Duration, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.SysProcAttr = gatewayProcAttr()
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("iop-node %v did not exit within %s; output:\n%s", args, timeout, out.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

func TestReconnectPolicyTable(t *testing.T) {
	neg := -1
	zero := 0
	three := 3
	cases := []struct {
		name        string
		yaml        string
		wantMax     *int
		wantProblem string
	}{
		{"omitted", "", ptr(10), ""},
		{"zero is unlimited", "reconnect:\n  max_attempts: 0\n", &zero, ""},
		{"positive is exact", "reconnect:\n  max_attempts: 3\n", &three, ""},
		{"negative is an error", "reconnect:\n  max_attempts: -1\n", &neg, "max_attempts must not be negative"},
		{"interval must be positive", "reconnect:\n  interval_sec: 0\n", ptr(10), "interval_sec must be > 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.LoadNode(nodeConfig(t, "127.0.0.1:1", "tok", tc.yaml))
			if tc.wantProblem != "" {
				var pe *config.ProblemsError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.wantProblem) {
					t.Fatalf("err = %v, want a problem %q", err, tc.wantProblem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *cfg.Reconnect.MaxAttempts != *tc.wantMax || *cfg.Reconnect.IntervalSec <= 0 {
				t.Fatalf("max_attempts = %d interval = %v", *cfg.Reconnect.MaxAttempts, *cfg.Reconnect.IntervalSec)
			}
		})
	}
	// The environment overrides the file, and an explicit 0 stays 0.
	t.Setenv("IOP_RECONNECT_MAX_ATTEMPTS", "0")
	cfg, err := config.LoadNode(nodeConfig(t, "127.0.0.1:1", "tok", "reconnect:\n  max_attempts: 4\n"))
	if err != nil || *cfg.Reconnect.MaxAttempts != 0 {
		t.Fatalf("env override: %v %v", err, cfg)
	}
}

func ptr(n int) *int { return &n }

func TestCheckConfigListsEveryProblemExit2(t *testing.T) {
	bad := writeConfig(t, "edge:\n  address: nowhere\nnode:\n  token: x\nreconnect:\n  max_attempts: -2\n  interval_sec: -1\n")
	code, out := runNode(t, 30*time.Second, nil, "--check-config", bad)
	if code != 2 {
		t.Fatalf("exit %d, want 2; output:\n%s", code, out)
	}
	for _, want := range []string{"edge.address", "node.id is required", "max_attempts", "interval_sec"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	good := nodeConfig(t, "127.0.0.1:7070", "tok", "")
	if code, out := runNode(t, 30*time.Second, nil, "--check-config", good); code != 0 {
		t.Fatalf("good config: exit %d\n%s", code, out)
	}
}

func TestBadConfigExit1(t *testing.T) {
	bad := writeConfig(t, "node:\n  id: x\n")
	if code, out := runNode(t, 30*time.Second, nil, "--config", bad); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
}

func TestFiniteBudgetExhaustedExit1(t *testing.T) {
	cfg := nodeConfig(t, closedAddr(t), "tok", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 3\n")
	code, out := runNode(t, 30*time.Second, nil, "--config", cfg)
	if code != 1 || !strings.Contains(out, "reconnect attempts exhausted after 3 attempts") {
		t.Fatalf("exit %d, want 1 after 3 attempts\n%s", code, out)
	}
	if n := strings.Count(out, "edge connect attempt failed"); n != 3 {
		t.Fatalf("%d attempts logged, want 3\n%s", n, out)
	}
}

func TestRejectedCredentialExit1(t *testing.T) {
	edge := stack.StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "n1", Token: "right", Providers: []config.ProviderSpec{{Name: "m", Type: "mock"}}}},
		Models: []config.ModelSpec{{Name: "demo", Providers: []config.ModelProvider{{Node: "n1", Provider: "m", Target: "x"}}}},
	}, stack.EdgeOptions{})
	cfg := nodeConfig(t, edge.NodeAddr, "wrong", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\n")
	code, out := runNode(t, 30*time.Second, nil, "--config", cfg)
	if code != 1 || !strings.Contains(out, "REJECT_CODE_CREDENTIALS") {
		t.Fatalf("exit %d, want 1 with a credential rejection\n%s", code, out)
	}
	if strings.Contains(out, "wrong") && strings.Contains(out, "token") && strings.Contains(out, `"wrong"`) {
		t.Fatalf("token value logged:\n%s", out)
	}
}

// SIGTERM while retrying in unlimited mode exits 0: process start never
// waited for the edge.
func TestSignalWhileRetryingExit0(t *testing.T) {
	cfg := nodeConfig(t, closedAddr(t), "tok", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\n")
	cmd := exec.Command(binary, "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "edge connect attempt failed") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no attempt logged:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGTERM")
	}
}

// A config file given without --config is refused (exit 2, naming the
// argument) instead of silently running the default configs/node.yaml.
func TestPositionalConfigRefusedExit2(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "configs"), 0o750); err != nil {
		t.Fatal(err)
	}
	// The default file exists and would run (and give up after one attempt).
	def := nodeConfig(t, closedAddr(t), "tok", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 1\n")
	b, err := os.ReadFile(def)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "configs", "node.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	meant := nodeConfig(t, "127.0.0.1:1", "tok", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, meant)
	cmd.SysProcAttr = gatewayProcAttr()
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "unexpected argument") {
		t.Fatalf("exit %v, want 2 naming the unexpected argument\n%s", err, out)
	}
	if strings.Contains(string(out), "iop-node starting") {
		t.Fatalf("the default config ran:\n%s", out)
	}
}

// SIGHUP neither kills the node nor ends its session: it is logged and
// ignored (the node's providers come from the edge), and SIGTERM still
// exits 0.
func TestSIGHUPIgnored(t *testing.T) {
	cfg := nodeConfig(t, closedAddr(t), "tok", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\n")
	cmd := exec.Command(binary, "--config", cfg)
	cmd.SysProcAttr = gatewayProcAttr()
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// Owner: the test; ends when the process exits (killed at worst).
	go func() { done <- cmd.Wait() }()
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("no %q logged:\n%s", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLog("edge connect attempt failed")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitLog("SIGHUP ignored")
	select {
	case err := <-done:
		t.Fatalf("the node exited after SIGHUP: %v\n%s", err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGTERM")
	}
}
