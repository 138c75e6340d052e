//go:build unix

package main

import (
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
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testproc"
)

// finalstopKillGraceMS is the CLI provider's kill grace: the sessions'
// close waits for it, well past what the test waits for a kill.
const finalstopKillGraceMS = 60000

// startCLINode starts an edge with model "agent" on node n1's CLI
// provider running command (with the provider's extra settings), and the
// node binary configured with yaml after the edge's address and token;
// it returns once the node is ready.
func startCLINode(t *testing.T, command []string, extra map[string]any, yaml string) *drainSetup {
	t.Helper()
	s := &drainSetup{done: make(chan error, 1), out: &safeBuffer{}}
	s.edge = stack.StartEdge(t, &config.Edge{
		Nodes: []config.NodeSpec{{ID: "n1", Token: "tok", Providers: []config.ProviderSpec{{
			Name: "agent", Type: "cli", Capacity: 1, Command: command, Extra: extra,
		}}}},
		Models: []config.ModelSpec{{Name: "agent", Providers: []config.ModelProvider{{Node: "n1", Provider: "agent", Target: "default"}}}},
	}, stack.EdgeOptions{})
	s.startNode(t, nodeConfig(t, s.edge.NodeAddr, "tok", yaml))
	s.edge.WaitReady(t, "n1", 20*time.Second)
	return s
}

// askAgent sends model "agent" one chat request; the channel closes when
// its answer ends (cut when the node is killed at the latest).
func (s *drainSetup) askAgent() <-chan struct{} {
	answered := make(chan struct{})
	// Owner: the test; ends when the run's answer ends.
	go func() {
		defer close(answered)
		resp, err := http.Post(s.edge.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"agent","messages":[{"role":"user","content":"work"}]}`))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	return answered
}

// finalstopStartCLINode starts startCLINode's edge and node, whose CLI
// writes its pid to pidFile and then ignores SIGTERM (so stopping it
// waits out the kill grace), with a 600 s drain. The CLI's process group
// is killed at cleanup.
func finalstopStartCLINode(t *testing.T, pidFile string) *drainSetup {
	t.Helper()
	testproc.Shell(t)
	t.Cleanup(func() {
		// Killed with the node on Linux (its parent-death signal and
		// its group's guard); elsewhere it outlives a node killed by a
		// signal (its own process group, SIGTERM ignored).
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return startCLINode(t, []string{"sh", "-c", `trap '' TERM; echo $$ > "$0"; exec sleep 600`, pidFile},
		map[string]any{"kill_grace_ms": finalstopKillGraceMS},
		"reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: 600\n")
}

// Once a second signal has cut the drain, the drain's goroutine begins
// the final stop before it stops the sessions: a signal sent while the
// sessions' close hangs (here a CLI that ignores SIGTERM, waited for up
// to its kill grace) has its default action at once, not once the close
// is over.
func TestSignalKillsTheNodeWhileItsSessionsHangOnClose(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	s := finalstopStartCLINode(t, pidFile)
	answered := s.askAgent()
	var pid int
	stack.WaitFor(t, 20*time.Second, "the CLI to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	stack.WaitFor(t, 20*time.Second, "the cut logged", func() bool { return strings.Contains(s.out.String(), "second signal: stopping now") })
	// The sessions' close is waiting for the CLI, which is still there.
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the CLI is gone before the node stopped it (%v)\n%s", err, s.out.String())
	}
	select {
	case err := <-s.done:
		t.Fatalf("the node exited (%v) before the CLI's kill grace was over\n%s", err, s.out.String())
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.killedBy(t, syscall.SIGTERM)
	select {
	case <-answered:
	case <-time.After(20 * time.Second):
		t.Fatal("the run's answer never ended")
	}
}
