package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// gatedPair is model m on the vLLM imitations of nodes a and b, one slot
// each, a first (ordered), with failover over both; the conversation
// "id" began on b (a was overloaded once) and a follow-up of it is held
// on b, filling it.
func gatedPair(t *testing.T) (e *stack.Edge, a, b *gatedResponses, nodeB *stack.Node, id string, held <-chan responsesAnswer) {
	t.Helper()
	a, b = newGatedResponses(t, "a"), newGatedResponses(t, "b")
	prov := func(u *gatedResponses) []config.ProviderSpec {
		return []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: 1}}
	}
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "ta", Providers: prov(a)}, {ID: "b", Token: "tb", Providers: prov(b)}},
		Models: []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 2, Providers: []config.ModelProvider{
			{Node: "a", Provider: "v", Target: target}, {Node: "b", Provider: "v", Target: target}}}},
	}
	e = startEdge(t, cfg)
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: nodeEnv})
	nodeB = stack.StartNode(t, e.NodeAddr, "b", stack.NodeOptions{Token: "tb", Getenv: nodeEnv})
	e.WaitReady(t, "a", waitLong)
	e.WaitReady(t, "b", waitLong)
	t.Cleanup(func() { a.release(); b.release() }) // before the servers close

	a.busyNext.Store(true)
	_, id, by, body := ask(t, e, "", false)
	if by != "b" {
		t.Fatalf("first request answered by %q, want b: %s", by, body)
	}
	b.armed.Store(true)
	held = askAsync(e, id)
	select {
	case <-b.got:
	case <-time.After(waitLong):
		t.Fatal("the held follow-up never reached b")
	}
	return e, a, b, nodeB, id, held
}

// While a follow-up waits for b (full), a new conversation is served by a
// at once: the waiter pinned to b holds nobody up. Before, the follow-up
// itself went to a and got its 404.
func TestResponsesPinnedWaiterHoldsNobodyUp37b(t *testing.T) {
	e, a, b, _, id, held := gatedPair(t)
	next := askAsync(e, id)
	stack.WaitFor(t, waitLong, "the follow-up queued", func() bool { return modelPending(e, "m") == 1 })
	status, _, by, body := ask(t, e, "", false)
	if status != http.StatusOK || by != "a" {
		t.Fatalf("a new conversation while the follow-up waits: %d by %q: %s", status, by, body)
	}
	if n := modelPending(e, "m"); n != 1 {
		t.Fatalf("pending %d, want the follow-up still waiting for b", n)
	}
	select {
	case r := <-next:
		t.Fatalf("the follow-up was answered while b was full: %d by %q: %s", r.status, r.by, r.body)
	default:
	}
	if n := len(a.requests()); n != 2 {
		t.Fatalf("a saw %d requests, want 2 (its 503, the new conversation)", n)
	}
	// Once b's held request ends, b serves the waiting follow-up. (Left
	// waiting, it held the edge's close for its whole drain once the
	// nodes had stopped.)
	b.release()
	if r := <-held; r.status != http.StatusOK || r.by != "b" {
		t.Fatalf("the held follow-up: %d by %q: %s", r.status, r.by, r.body)
	}
	if r := <-next; r.status != http.StatusOK || r.by != "b" {
		t.Fatalf("the waiting follow-up once b freed: %d by %q: %s", r.status, r.by, r.body)
	}
}

// b's node goes away while the follow-up waits for it: the waiter waits
// for any candidate from then on and is served by a at once (whose own
// answer, vLLM's 404, reaches the client) instead of waiting out its
// queue timeout for a provider that is gone.
func TestResponsesPinnedProviderLostWhileWaiting37b(t *testing.T) {
	e, a, _, nodeB, id, held := gatedPair(t)
	next := askAsync(e, id)
	stack.WaitFor(t, waitLong, "the follow-up queued", func() bool { return modelPending(e, "m") == 1 })
	start := time.Now()
	nodeB.Stop()
	r := <-next
	if r.status != http.StatusNotFound || !strings.Contains(r.body, "Response with id '"+id+"' not found.") {
		t.Fatalf("follow-up after b was lost: %d by %q: %s", r.status, r.by, r.body)
	}
	// The model's default queue timeout is far longer: the waiter was
	// released by the loss, not by its timeout.
	if waited := time.Since(start); waited > waitLong {
		t.Fatalf("answered %s after b was lost", waited)
	}
	// The follow-up held on b, already sent upstream, fails over to a
	// when the edge sees the node lost first (404 from a), or ends with
	// b's node's own error when that node's cancel of its upstream
	// request reaches the edge first (502): which one is a race of the
	// node's shutdown, not the pin's.
	want := 2 // a's 503, the released follow-up
	switch r := <-held; r.status {
	case http.StatusNotFound:
		want++
	case http.StatusBadGateway:
	default:
		t.Fatalf("the follow-up held on b, after b was lost: %d by %q: %s", r.status, r.by, r.body)
	}
	if n := len(a.requests()); n != want {
		t.Fatalf("a saw %d requests, want %d (its 503, the follow-ups that reached it)", n, want)
	}
}
