package stack

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/internal/testhttp"
	"github.com/iop-gateway/iop/nodeagent"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// failoversOf is iop_failovers_total for model and reason.
func failoversOf(t *testing.T, e *Edge, model, reason string) float64 {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "iop_failovers_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["model"] == model && got["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A request that reaches a draining node anyway (here: a session of a
// node already draining whose report the edge has not had: it sends none)
// is refused without reaching the backend, and the edge moves it to the
// other candidate; the client sees only that one's answer.
func TestRequestReachingDrainingNodeFailsOver(t *testing.T) {
	upA, upB := testhttp.StartHeldVLLM(t), testhttp.StartHeldVLLM(t)
	upB.Free()
	cfg := drainPair(upA, upB)
	cfg.Models[0].MaxAttempts = 2
	e := StartEdge(t, cfg, EdgeOptions{})
	StartNode(t, e.NodeAddr, "b", NodeOptions{Token: "tb"})
	e.WaitReady(t, "b", 10*time.Second)

	agent := nodeagent.NewAgent(Factories(), adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir(), Logger: zap.NewNop()})
	t.Cleanup(agent.Close)
	if err := agent.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: e.NodeAddr, HandshakeTimeout: 5 * time.Second},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: "a", Token: "ta", AdapterTypes: agent.AdapterTypes()})
	if err != nil || !resp.GetAccepted() {
		cancel()
		t.Fatalf("register: %v %v", err, resp)
	}
	if _, err := agent.Apply(resp.GetConfig(), true); err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := c.ReadyWith(ctx, &iop.NodeReadyRequest{NodeId: "a", Adapters: agent.Capabilities()}); err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan struct{})
	// Owner: the test; stops when cancel closes the connection.
	go func() { defer close(served); _ = c.Serve(ctx, agent.HandleStream) }()
	t.Cleanup(func() { cancel(); <-served })
	e.WaitReady(t, "a", 10*time.Second)

	r, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if r.StatusCode != http.StatusOK || !strings.Contains(string(b), `"content":"lo"`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("answer: %d %s", r.StatusCode, b)
	}
	if upA.Hits.Load() != 0 || upB.Hits.Load() != 1 {
		t.Fatalf("upstream a hit %d times, b %d", upA.Hits.Load(), upB.Hits.Load())
	}
	if n := failoversOf(t, e, "m", "at_capacity"); n != 1 {
		t.Fatalf("%v failovers at_capacity, want 1", n)
	}
}
