package stack

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/internal/testhttp"
)

// openStream posts a streamed chat request for model and returns once its
// first event has arrived; the rest of the answer comes on rest.
func openStream(t *testing.T, e *Edge, model string) (rest <-chan string) {
	t.Helper()
	resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "data: ") {
		_ = resp.Body.Close()
		t.Fatalf("stream: status %d, first line %q, %v", resp.StatusCode, line, err)
	}
	out := make(chan string, 1)
	// Owner: the test; ends with the answer (the upstream released, or
	// the stream cut).
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(br)
		out <- line + string(b)
	}()
	return out
}

func answer(t *testing.T, rest <-chan string) string {
	t.Helper()
	select {
	case s := <-rest:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("the stream never ended")
		return ""
	}
}

// releases is iop_lease_released_total of node/provider for reason.
func releases(t *testing.T, e *Edge, node, provider string, reason dispatch.ReleaseReason) float64 {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "iop_lease_released_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["node"] == node && got["provider"] == provider && got["reason"] == string(reason) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func providerHealth(e *Edge, node string) string {
	for _, n := range e.Dispatcher.Status().Nodes {
		if n.ID == node && len(n.Providers) > 0 {
			return n.Providers[0].Health
		}
	}
	return ""
}

// drainPair is model "m" on vLLM providers of nodes a and b, a first
// (ordered routing), load reports off (a drain is reported anyway).
func drainPair(upA, upB *testhttp.HeldVLLM) *config.Edge {
	return &config.Edge{
		Nodes: []config.NodeSpec{
			{ID: "a", Token: "ta", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: upA.URL + "/v1", Capacity: 2}}},
			{ID: "b", Token: "tb", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: upB.URL + "/v1", Capacity: 2}}},
		},
		Models: []config.ModelSpec{{Name: "m", Routing: "ordered", QueueTimeoutSec: 20, Providers: []config.ModelProvider{
			{Node: "a", Provider: "v", Target: "t"}, {Node: "b", Provider: "v", Target: "t"}}}},
	}
}

// A node told to drain while a streamed answer is in flight: the edge
// shows its provider draining and sends the next request to the other
// node, the answer in flight finishes whole, its lease returns as
// completed (not node_lost), and the node then stops by itself.
func TestDrainFinishesStreamAndMovesNewWork(t *testing.T) {
	upA, upB := testhttp.StartHeldVLLM(t), testhttp.StartHeldVLLM(t)
	e := StartEdge(t, drainPair(upA, upB), EdgeOptions{})
	a := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	StartNode(t, e.NodeAddr, "b", NodeOptions{Token: "tb"})
	e.WaitReady(t, "a", 10*time.Second)
	e.WaitReady(t, "b", 10*time.Second)

	first := openStream(t, e, "m")
	if upA.Hits.Load() != 1 {
		t.Fatalf("first stream: upstream a hit %d times", upA.Hits.Load())
	}
	drained := make(chan error, 1)
	// Owner: the test; Drain returns once the stream on a has ended.
	go func() { drained <- a.Drain(30 * time.Second) }()
	WaitFor(t, 10*time.Second, "a/v shown draining", func() bool { return providerHealth(e, "a") == "draining" })
	if s := e.Dispatcher.Status().Nodes[0].Providers[0]; s.Status != "draining" || s.InFlight != 1 || !e.Dispatcher.Dispatchable() {
		t.Fatalf("a/v during the drain: %+v", s)
	}

	second := openStream(t, e, "m")
	if upA.Hits.Load() != 1 || upB.Hits.Load() != 1 {
		t.Fatalf("request during the drain: upstream a hit %d times, b %d", upA.Hits.Load(), upB.Hits.Load())
	}
	select {
	case err := <-drained:
		t.Fatalf("the drain ended (%v) with a stream in flight", err)
	default:
	}

	upA.Free()
	if got := answer(t, first); !strings.Contains(got, `"content":"lo"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("the stream in flight was not finished whole:\n%s", got)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the drain did not end once the stream had")
	}
	<-a.Done()
	WaitFor(t, 10*time.Second, "a's lease returned", func() bool { return releases(t, e, "a", "v", dispatch.ReasonCompleted) == 1 })
	if n := releases(t, e, "a", "v", dispatch.ReasonNodeLost); n != 0 {
		t.Fatalf("%v leases of a returned as node_lost", n)
	}
	upB.Free()
	if got := answer(t, second); !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("the request moved to b: %s", got)
	}
}

// The bound: a stream that does not end by it is cut (its lease returns
// as when a node stops without a drain), and the node stops within the
// bound and a small margin.
func TestDrainBoundCutsWhatStillRuns(t *testing.T) {
	upA, upB := testhttp.StartHeldVLLM(t), testhttp.StartHeldVLLM(t)
	e := StartEdge(t, drainPair(upA, upB), EdgeOptions{})
	a := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	e.WaitReady(t, "a", 10*time.Second)
	first := openStream(t, e, "m")
	const bound = 300 * time.Millisecond
	start := time.Now()
	if err := a.Drain(bound); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain of a stream that does not end: %v", err)
	}
	if took := time.Since(start); took > bound+5*time.Second {
		t.Fatalf("the node stopped %s after the drain began; bound %s", took, bound)
	}
	// Cut with a terminal that says why (Agent.Cut), written before the
	// session closes: the caller, who already has the first chunk, reads
	// it as the stream's last event, and the lease returns as an error,
	// not as a lost node.
	if got := answer(t, first); strings.Contains(got, "[DONE]") || !strings.Contains(got, "it is shutting down") {
		t.Fatalf("the stream held past the bound: %s", got)
	}
	WaitFor(t, 10*time.Second, "a's lease returned", func() bool { return releases(t, e, "a", "v", dispatch.ReasonError) == 1 })
	for _, r := range []dispatch.ReleaseReason{dispatch.ReasonNodeLost, dispatch.ReasonCancelled, dispatch.ReasonCompleted} {
		if n := releases(t, e, "a", "v", r); n != 0 {
			t.Fatalf("%v leases returned as %s", n, r)
		}
	}
}

// A request for a model whose only candidate drains waits (it is not sent
// there), and gets the usual answer when no other comes: here the queue
// timeout of the model.
func TestDrainingOnlyCandidateNotSentTo(t *testing.T) {
	upA := testhttp.StartHeldVLLM(t)
	e := StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "a", Token: "ta", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: upA.URL + "/v1", Capacity: 2}}}},
		Models: []config.ModelSpec{{Name: "m", QueueTimeoutSec: 0.5, Providers: []config.ModelProvider{{Node: "a", Provider: "v", Target: "t"}}}},
	}, EdgeOptions{})
	a := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	e.WaitReady(t, "a", 10*time.Second)
	first := openStream(t, e, "m")
	drained := make(chan error, 1)
	// Owner: the test; Drain returns once the stream has ended.
	go func() { drained <- a.Drain(30 * time.Second) }()
	WaitFor(t, 10*time.Second, "a/v shown draining", func() bool { return providerHealth(e, "a") == "draining" })
	resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "queue_timeout") || upA.Hits.Load() != 1 {
		t.Fatalf("request during the drain: %d %s; upstream hit %d times", resp.StatusCode, body, upA.Hits.Load())
	}
	upA.Free()
	answer(t, first)
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
}
