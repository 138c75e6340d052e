//go:build unix

package stack

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testproc"
)

// POST /admin/sessions/{id}/terminate ends a CLI session's running process
// on the node, end to end.
func TestTerminateSessionKillsTheProcess(t *testing.T) {
	testproc.Shell(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{
			{Name: "agent", Type: "cli", Capacity: 1, Command: []string{"sh", "-c", `echo $$ > "$0"; exec sleep 60`, pidFile}}}}},
		Models: []config.ModelSpec{{Name: "agent", Providers: []config.ModelProvider{{Node: "a", Provider: "agent", Target: "default"}}}},
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "tok-a"})
	e.WaitReady(t, "a", 10*time.Second)

	done := make(chan int, 1)
	// Owner: the test; ends when the terminated run answers.
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"agent","messages":[{"role":"user","content":"work"}]}`))
		req.Header.Set("X-IOP-Session-Id", "sess-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	var pid int
	WaitFor(t, 10*time.Second, "the CLI process to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("process %d not running before terminate: %v", pid, err)
	}
	resp, err := http.Post(e.URL+"/admin/sessions/sess-1/terminate", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("terminate: status %d", resp.StatusCode)
	}
	WaitFor(t, 10*time.Second, "the session's process to be gone", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	select {
	case st := <-done:
		if st == http.StatusOK {
			t.Fatalf("the terminated run answered 200")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the terminated run never answered")
	}
}
