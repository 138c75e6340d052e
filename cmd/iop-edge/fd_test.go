package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testproc"
)

func buildEdge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "iop-edge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer collects a child's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func healthy(client *http.Client, addr string) bool {
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Running out of file descriptors does not stop iop-edge: with
// RLIMIT_NOFILE at 64, slow clients hold every descriptor, connections to
// both ports fail to be accepted, and once the clients go the edge serves
// again; it exits 0 on SIGTERM.
func TestSurvivesDescriptorExhaustion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	httpAddr, nodeAddr := freeAddr(t), freeAddr(t)
	cfgFile := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
listen: {http: %q, node: %q}
log: {level: warn}
nodes:
  - id: a
    token: secret-a
    providers: [{name: m, type: mock, capacity: 2}]
models:
  - name: echo
    providers: [{node: a, provider: m, target: echo}]
`, httpAddr, nodeAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	// sh execs iop-edge in its own place: the parent-death signal is kept.
	cmd := exec.Command(testproc.Shell(t), "-c", `ulimit -n 64 && exec "$0" --config "$1"`, bin, cfgFile)
	cmd.SysProcAttr = gatewayProcAttr()
	exited := startHealthy(t, cmd, &out, httpAddr)

	// Hold more connections than the edge has descriptors, each with a
	// request body that never completes.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range 100 {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			break // the backlog is full: as exhausted as it gets
		}
		held = append(held, c)
		_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	}
	// Connections to the node port now fail to be accepted (EMFILE).
	for range 5 {
		if c, err := net.DialTimeout("tcp", nodeAddr, time.Second); err == nil {
			held = append(held, c)
		}
	}
	time.Sleep(time.Second)
	select {
	case err := <-exited:
		t.Fatalf("edge exited under descriptor exhaustion: %v\n%s", err, out.String())
	default:
	}
	if strings.Contains(out.String(), "server failed") {
		t.Fatalf("a listener gave up under descriptor exhaustion:\n%s", out.String())
	}
	for _, c := range held {
		_ = c.Close()
	}
	held = nil
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(15 * time.Second)
	for !healthy(client, httpAddr) {
		if time.Now().After(deadline) {
			t.Fatalf("edge did not recover after the clients left:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", out.String())
	}
}

// startHealthy starts the edge binary cmd with its output in out, kills it
// at cleanup, and waits (15 s at most) until httpAddr answers /healthz. The
// channel carries the process's exit.
func startHealthy(t *testing.T, cmd *exec.Cmd, out *syncBuffer, httpAddr string) <-chan error {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	gone := make(chan struct{})
	// Owner: the test. Stops when the child exits (SIGTERM below, or the
	// cleanup's kill).
	go func() { exited <- cmd.Wait(); close(gone) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-gone
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(15 * time.Second)
	for !healthy(client, httpAddr) {
		if time.Now().After(deadline) {
			t.Fatalf("edge never became healthy:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return exited
}
