package main

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testhttp"
)

// drainSetup is an edge with model "m" on node n1's vLLM provider, whose
// upstream holds every streamed answer after its first chunk until
// free; the node is the binary, with shutdown.drain_sec drain.
type drainSetup struct {
	edge *stack.Edge
	up   *testhttp.HeldVLLM
	cmd  *exec.Cmd
	out  *safeBuffer
	done chan error
}

// startNode starts the node binary with config file cfg, its output in
// s.out, its exit sent to s.done; it is killed at cleanup at the latest.
func (s *drainSetup) startNode(t *testing.T, cfg string) {
	t.Helper()
	s.cmd = exec.Command(binary, "--config", cfg)
	s.cmd.SysProcAttr = gatewayProcAttr()
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Owner: the test; ends when the process exits (killed at cleanup at
	// the latest).
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
}

// free lets every held answer finish.
func (s *drainSetup) free() { s.up.Free() }

func startDrainSetup(t *testing.T, drain string) *drainSetup {
	t.Helper()
	return startNodeWith(t, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: "+drain+"\n")
}

// startNodeWith is drainSetup's edge and node, the node configured with
// yaml (its sections after the edge's address and token).
func startNodeWith(t *testing.T, yaml string) *drainSetup {
	t.Helper()
	s := &drainSetup{up: testhttp.StartHeldVLLM(t), done: make(chan error, 1), out: &safeBuffer{}}
	up := s.up
	s.edge = stack.StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "n1", Token: "tok", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: up.URL + "/v1", Capacity: 2}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "n1", Provider: "v", Target: "t"}}}},
	}, stack.EdgeOptions{})
	cfg := nodeConfig(t, s.edge.NodeAddr, "tok", yaml)
	s.startNode(t, cfg)
	s.edge.WaitReady(t, "n1", 20*time.Second)
	return s
}

// stream opens a streamed chat for "m" and returns once its first event
// arrived; the whole answer comes on the channel.
func (s *drainSetup) stream(t *testing.T) <-chan string {
	t.Helper()
	resp, err := http.Post(s.edge.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("stream: %d %q %v", resp.StatusCode, line, err)
	}
	out := make(chan string, 1)
	// Owner: the test; ends with the answer.
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(br)
		out <- line + string(b)
	}()
	return out
}

func (s *drainSetup) exited(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, s.out.String())
		}
	case <-time.After(within):
		t.Fatalf("no exit within %s\n%s", within, s.out.String())
	}
}

func (s *drainSetup) health(t *testing.T) string {
	for _, n := range s.edge.Dispatcher.Status().Nodes {
		if len(n.Providers) > 0 {
			return n.Providers[0].Health
		}
	}
	return ""
}

func gotAnswer(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("the stream never ended")
		return ""
	}
}

// SIGTERM drains: the edge shows the provider draining at once, the node
// keeps running while a stream is in flight, the stream finishes whole,
// and the node then exits 0 by itself.
func TestSIGTERMDrainsThenExits0(t *testing.T) {
	s := startDrainSetup(t, "30")
	answer := s.stream(t)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
	select {
	case err := <-s.done:
		t.Fatalf("exited (%v) with a stream in flight\n%s", err, s.out.String())
	default:
	}
	s.free()
	if a := gotAnswer(t, answer); !strings.HasSuffix(a, "data: [DONE]\n\n") || !strings.Contains(a, `"content":"lo"`) {
		t.Fatalf("the stream in flight was cut:\n%s", a)
	}
	s.exited(t, 20*time.Second)
	if out := s.out.String(); !strings.Contains(out, "a second signal stops at once") || !strings.Contains(out, "drained") {
		t.Fatalf("drain not logged:\n%s", out)
	}
}

// A second signal during the drain stops the node at once, exit 0, with a
// log line saying so; the stream still in flight is cut.
func TestSecondSignalCutsTheDrain(t *testing.T) {
	s := startDrainSetup(t, "600")
	answer := s.stream(t)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	s.exited(t, 20*time.Second)
	if a := gotAnswer(t, answer); strings.Contains(a, "[DONE]") {
		t.Fatalf("the stream finished after the second signal:\n%s", a)
	}
	if !strings.Contains(s.out.String(), "second signal: stopping now") {
		t.Fatalf("second signal not logged:\n%s", s.out.String())
	}
}

// shutdown.drain_sec 0 keeps the stop without a drain: the stream in
// flight is cut and the node exits 0 at once.
func TestNoDrainStopsAtOnce(t *testing.T) {
	s := startDrainSetup(t, "0")
	answer := s.stream(t)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.exited(t, 20*time.Second)
	if a := gotAnswer(t, answer); strings.Contains(a, "[DONE]") {
		t.Fatalf("the stream finished without a drain:\n%s", a)
	}
}
