package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A node dials out and needs no inbound port (CONTRACT §1): the running
// iop-node binary, ready at its edge and serving a request through it,
// holds no listening TCP socket. Then SIGINT (local shutdown) ends it with
// exit code 0 (CONTRACT §2).
func TestReadyNodeListensOnNoPortAndSIGINTExits0(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	edge := stack.StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "n1", Token: "tok", Providers: []config.ProviderSpec{{Name: "m", Type: "mock"}}}},
		Models: []config.ModelSpec{{Name: "demo", Providers: []config.ModelProvider{{Node: "n1", Provider: "m", Target: "x"}}}},
	}, stack.EdgeOptions{})
	cmd := exec.Command(binary, "--config", nodeConfig(t, edge.NodeAddr, "tok", ""))
	cmd.SysProcAttr = gatewayProcAttr()
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() { // a failure before the SIGINT below
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	edge.WaitReady(t, "n1", 20*time.Second)
	resp, err := http.Post(edge.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("through the node: %d %s\n%s", resp.StatusCode, body, out.String())
	}

	socks := socketInodes(t, cmd.Process.Pid)
	defer func() {
		// Local shutdown of a ready node (SIGINT, as Ctrl-C sends) exits 0.
		waited = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }() // Owner: the test; ends when the node exits.
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("exit after SIGINT: %v, want 0\n%s", err, out.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("no exit within 20 s of SIGINT")
		}
	}()
	if len(socks) == 0 {
		t.Fatal("the node holds no socket at all: not its edge connection either")
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, inode := range listeningInodes(t, f) {
			if socks[inode] {
				t.Errorf("iop-node listens on a TCP socket (%s inode %s)", f, inode)
			}
		}
	}
}

// socketInodes are the inodes of the sockets pid has open.
func socketInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if in, ok := strings.CutPrefix(link, "socket:["); ok {
			out[strings.TrimSuffix(in, "]")] = true
		}
	}
	return out
}

// listeningInodes are the inodes of the sockets in LISTEN state (0A) of a
// /proc/net/tcp-format file.
func listeningInodes(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[3] == "0A" {
			out = append(out, fields[9])
		}
	}
	return out
}
