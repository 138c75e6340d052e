package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A streamed run that fails with a retryable error (the backend's 503)
// after its first chunk went out is not moved to another candidate
// either: the client gets the chunk and an error event.
func TestNoFailoverOnErrorAfterStreamStarted(t *testing.T) {
	const other = "gpu-b"
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("first", nil)})
	cfg.Nodes = append(cfg.Nodes, config.NodeSpec{ID: other, Token: nodeToken, Providers: []config.ProviderSpec{mockProvider("fine", nil)}})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "first", Target: "x"}, {Node: other, Provider: "fine", Target: "x"}}}}
	e := startEdge(t, cfg)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, env *iop.Envelope) {
		runID := env.GetRunRequest().GetRunId()
		for i, ev := range []*iop.RunEvent{{Type: iop.RunEventType_RUN_EVENT_TYPE_START}, {Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "partial"},
			{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "engine overloaded", HttpStatus: http.StatusServiceUnavailable}}} {
			ev.RunId, ev.Sequence = runID, uint64(i+1)
			_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
		}
		_ = st.CloseWrite()
		silent(n, ctx, st, nil)
	})
	stack.StartNode(t, e.NodeAddr, other, stack.NodeOptions{Token: nodeToken, Getenv: nodeEnv})
	e.WaitReady(t, other, waitLong)

	r := post(t, e, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
	body := string(r.Body)
	if r.Status != http.StatusOK || !strings.Contains(body, "partial") || strings.Contains(body, "hello there") ||
		strings.Contains(body, "[DONE]") || !strings.Contains(body, `"error"`) {
		t.Errorf("%d %s: want the first chunk and an error event, nothing from another provider", r.Status, body)
	}
	if got := metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": "unavailable"}); got != 0 {
		t.Errorf("unavailable failovers %v, want 0", got)
	}
}
