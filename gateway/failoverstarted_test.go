package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A streamed run whose node is lost after the client got its first chunk
// is not moved to another candidate: a second answer would be joined to
// the first. The stream ends with an error event instead.
func TestNoFailoverAfterStreamStarted(t *testing.T) {
	e, first := orderedAfterFakeNode(t, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, runID string) {
		sendRunEvents(st, runID, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START}, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "partial"})
		silent(n, ctx, st, nil)
	})

	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello there"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	for !strings.Contains(got.String(), "partial") {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended before its first chunk: %v: %s", err, got.String())
		}
	}
	_ = first.cc.Close() // the node is lost after the client's first chunk
	rest, _ := io.ReadAll(br)
	got.Write(rest)
	body := got.String()
	if strings.Contains(body, "hello there") || strings.Contains(body, "[DONE]") || !strings.Contains(body, `"error"`) {
		t.Errorf("stream %s: want the first chunk and an error event, nothing from another provider", body)
	}
	if got := metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": "node_lost"}); got != 0 {
		t.Errorf("node_lost failovers %v, want 0", got)
	}
}

// A streamed run that fails with a retryable error (the backend's 503)
// after its first chunk went out is not moved to another candidate
// either: the client gets the chunk and an error event.
func TestNoFailoverOnErrorAfterStreamStarted(t *testing.T) {
	e, _ := orderedAfterFakeNode(t, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, runID string) {
		sendRunEvents(st, runID, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START}, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "partial"},
			&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "engine overloaded", HttpStatus: http.StatusServiceUnavailable}})
		_ = st.CloseWrite()
		silent(n, ctx, st, nil)
	})

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

// orderedAfterFakeNode starts an edge whose model "m" goes first to a fake
// node answering runs with run, then to a real node ("gpu-b") with a mock
// provider, ready when it returns.
func orderedAfterFakeNode(t *testing.T, run func(n *fakeNode, ctx context.Context, st *nodewire.Stream, runID string)) (*stack.Edge, *fakeNode) {
	t.Helper()
	const other = "gpu-b"
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("first", nil)})
	cfg.Nodes = append(cfg.Nodes, config.NodeSpec{ID: other, Token: nodeToken, Providers: []config.ProviderSpec{mockProvider("fine", nil)}})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "first", Target: "x"}, {Node: other, Provider: "fine", Target: "x"}}}}
	e := startEdge(t, cfg)
	first := startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, env *iop.Envelope) {
		run(n, ctx, st, env.GetRunRequest().GetRunId())
	})
	stack.StartNode(t, e.NodeAddr, other, stack.NodeOptions{Token: nodeToken, Getenv: nodeEnv})
	e.WaitReady(t, other, waitLong)
	return e, first
}

// sendRunEvents sends evs in order, numbered from 1, for runID.
func sendRunEvents(st *nodewire.Stream, runID string, evs ...*iop.RunEvent) {
	for i, ev := range evs {
		ev.RunId, ev.Sequence = runID, uint64(i+1)
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
	}
}
