package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// A run whose node is lost while the edge still sends it the request
// (nothing reached the client) goes to the next candidate, on another
// node, instead of answering 502.
func TestFailoverWhenNodeLostWhileSendingRun(t *testing.T) {
	const other = "gpu-b"
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("stuck", nil)})
	cfg.Nodes = append(cfg.Nodes, config.NodeSpec{ID: other, Token: nodeToken, Providers: []config.ProviderSpec{mockProvider("fine", nil)}})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "stuck", Target: "x"}, {Node: other, Provider: "fine", Target: "x"}}}}
	e := startEdge(t, cfg)
	stuck := startFakeNode(t, e, nil) // never grants window: a large request stays in its send
	stack.StartNode(t, e.NodeAddr, other, stack.NodeOptions{Token: nodeToken, Getenv: nodeEnv})
	e.WaitReady(t, other, waitLong)

	word := strings.Repeat("x", 1<<20)
	answer := postAsync(t, e, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+word+`"}]}`)
	stack.WaitFor(t, waitLong, "the lease on the stuck node", func() bool { return inFlight(e, "stuck") == 1 })
	_ = stuck.cc.Close()
	r := waitFor(t, answer, waitLong, "the answer")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), word) {
		t.Fatalf("status %d, body %.200s", r.Status, r.Body)
	}
	if got := metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": "node_lost"}); got != 1 {
		t.Errorf("node_lost failovers %v, want 1", got)
	}
	waitReleased(t, e, "fine")
}
