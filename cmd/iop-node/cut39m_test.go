package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testhttp"
)

// A node that stops (no drain) with a request in flight that has sent its
// caller nothing yet ends it with its own word before closing its session:
// the caller gets the 503 naming the shutdown, not a lost node's error,
// and the node logs no terminal left unsent (the cut's terminal came
// within cutWait).
func TestStopCutsWorkInFlightWithTheNodesWord39m(t *testing.T) {
	up, hits := testhttp.SilentVLLM(t)
	s := &drainSetup{done: make(chan error, 1), out: &safeBuffer{}}
	s.edge = stack.StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "n1", Token: "tok", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: up.URL + "/v1", Capacity: 2}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "n1", Provider: "v", Target: "t"}}}},
	}, stack.EdgeOptions{})
	s.startNode(t, nodeConfig(t, s.edge.NodeAddr, "tok", "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: 0\n"))
	s.edge.WaitReady(t, "n1", 20*time.Second)

	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	// Owner: the test; ends with the answer (bounded by the client's
	// timeout).
	go func() {
		c := &http.Client{Timeout: 30 * time.Second}
		r, err := c.Post(s.edge.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		got <- answer{r.StatusCode, string(b), err}
	}()
	stack.WaitFor(t, 10*time.Second, "the request held at the upstream", func() bool { return hits.Load() == 1 })
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.exited(t, 20*time.Second)
	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after the node stopped")
	}
	if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "it is shutting down") {
		t.Fatalf("answer: %d %v %s\n%s", a.status, a.err, a.body, s.out.String())
	}
	if out := s.out.String(); strings.Contains(out, "whose end was not sent") {
		t.Fatalf("the cut's terminal was not waited for:\n%s", out)
	}
}
