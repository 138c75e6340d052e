package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// gatedResponses is a vllmResponses whose next request, once armed,
// waits for the test before it is served.
type gatedResponses struct {
	*vllmResponses
	armed atomic.Bool
	got   chan struct{} // closed when the armed request arrived
	gate  chan struct{} // closed by the test to let it be served
}

func newGatedResponses(t *testing.T, name string) *gatedResponses {
	g := &gatedResponses{
		vllmResponses: &vllmResponses{name: name, store: map[string]bool{}},
		got:           make(chan struct{}), gate: make(chan struct{}),
	}
	g.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/responses" && g.armed.CompareAndSwap(true, false) {
			close(g.got)
			select {
			case <-g.gate:
			case <-time.After(2 * waitLong): // a test that failed early must not hold the server
			}
		}
		g.serve(w, r)
	})
	return g
}

type responsesAnswer struct {
	status int
	by     string
	body   string
}

// askAsync posts a non-streamed follow-up from another goroutine; the
// answer (or a transport error as status 0) arrives on the channel.
func askAsync(e *stack.Edge, prev string) <-chan responsesAnswer {
	ch := make(chan responsesAnswer, 1)
	// Owner: the test. Stops when the edge answers or the client's
	// timeout passes.
	go func() {
		c := &http.Client{Timeout: 6 * waitLong}
		r, err := c.Post(e.URL+"/v1/responses", "application/json",
			strings.NewReader(`{"model":"m","input":"More.","previous_response_id":"`+prev+`"}`))
		if err != nil {
			ch <- responsesAnswer{body: err.Error()}
			return
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		var got struct {
			ID string `json:"id"`
		}
		a := responsesAnswer{status: r.StatusCode, body: string(b)}
		if json.Unmarshal(b, &got) == nil && strings.HasPrefix(got.ID, "resp_") {
			a.by = got.ID[len("resp_"):][:1]
		}
		ch <- a
	}()
	return ch
}

// nodeInFlight is the lease count of the node's one provider.
func nodeInFlight(e *stack.Edge, node string) int32 {
	for _, n := range e.Dispatcher.Status().Nodes {
		if n.ID == node {
			for _, p := range n.Providers {
				return p.InFlight
			}
		}
	}
	return -1
}

// A follow-up whose provider was full went to another candidate, which
// failed before its first byte; by then the provider holding the previous
// response had room again. The failover must go there, not to the next
// candidate in order (which answers vLLM's 404): the pin holds for every
// attempt, not the first only.
func TestResponsesFailoverKeepsThePin36(t *testing.T) {
	a, b, p := newGatedResponses(t, "a"), newGatedResponses(t, "b"), newGatedResponses(t, "p")
	prov := func(u *gatedResponses, capacity int) []config.ProviderSpec {
		return []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: capacity}}
	}
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{
			{ID: "a", Token: "ta", Providers: prov(a, 4)},
			{ID: "b", Token: "tb", Providers: prov(b, 4)},
			{ID: "p", Token: "tp", Providers: prov(p, 1)},
		},
		Models: []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 3, Providers: []config.ModelProvider{
			{Node: "a", Provider: "v", Target: target}, {Node: "b", Provider: "v", Target: target}, {Node: "p", Provider: "v", Target: target}}}},
	}
	e := startEdge(t, cfg)
	for _, id := range []string{"a", "b", "p"} {
		stack.StartNode(t, e.NodeAddr, id, stack.NodeOptions{Token: "t" + id, Getenv: nodeEnv})
		e.WaitReady(t, id, waitLong)
	}

	// The conversation begins on p: a and b are overloaded once each.
	a.busyNext.Store(true)
	b.busyNext.Store(true)
	_, id, by, body := ask(t, e, "", false)
	if by != "p" {
		t.Fatalf("first request answered by %q, want p: %s", by, body)
	}

	// A follow-up held on p fills it (capacity 1).
	p.armed.Store(true)
	held := askAsync(e, id)
	select {
	case <-p.got:
	case <-time.After(waitLong):
		t.Fatal("the held follow-up never reached p")
	}

	// The next follow-up finds p full and goes to a, which waits.
	a.armed.Store(true)
	a.busyNext.Store(true)
	next := askAsync(e, id)
	select {
	case <-a.got:
	case <-time.After(waitLong):
		t.Fatal("the second follow-up never reached a")
	}

	// p finishes and has room again; then a answers 503.
	close(p.gate)
	if r := <-held; r.status != http.StatusOK || r.by != "p" {
		t.Fatalf("held follow-up: %d by %q: %s", r.status, r.by, r.body)
	}
	stack.WaitFor(t, waitLong, "p's slot back", func() bool { return nodeInFlight(e, "p") == 0 })
	close(a.gate)

	r := <-next
	if r.status != http.StatusOK || r.by != "p" {
		t.Fatalf("follow-up after a's 503: %d by %q, want 200 from p (b holds no such response): %s", r.status, r.by, r.body)
	}
	if n := len(b.requests()); n != 1 {
		t.Fatalf("b saw %d requests, want 1 (its 503 at the start)", n)
	}
}
