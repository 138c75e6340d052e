package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
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
	armed   atomic.Bool
	got     chan struct{} // closed when the armed request arrived
	gate    chan struct{} // closed by release to let it be served
	release func()        // closes gate; idempotent
}

func newGatedResponses(t *testing.T, name string) *gatedResponses {
	g := &gatedResponses{
		vllmResponses: &vllmResponses{name: name, store: map[string]bool{}},
		got:           make(chan struct{}), gate: make(chan struct{}),
	}
	g.release = sync.OnceFunc(func() { close(g.gate) })
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

// A follow-up whose provider (p, one slot) is full waits for it rather
// than going to another candidate, which holds no such response and
// answers vLLM's 404; a and b stay free meanwhile and see nothing of it.
// Once p has room the follow-up is served there. (It used to go to a;
// see pinned37b_test.go in dispatch.)
func TestResponsesFollowUpWaitsForItsProvider36(t *testing.T) {
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

	// The next follow-up finds p full and waits for it.
	next := askAsync(e, id)
	stack.WaitFor(t, waitLong, "the follow-up queued", func() bool { return modelPending(e, "m") == 1 })
	p.release()
	if r := <-held; r.status != http.StatusOK || r.by != "p" {
		t.Fatalf("held follow-up: %d by %q: %s", r.status, r.by, r.body)
	}
	if r := <-next; r.status != http.StatusOK || r.by != "p" {
		t.Fatalf("queued follow-up: %d by %q, want 200 from p: %s", r.status, r.by, r.body)
	}
	a.release()
	b.release()
	if na, nb := len(a.requests()), len(b.requests()); na != 1 || nb != 1 {
		t.Fatalf("a saw %d requests, b %d; want 1 each (their 503s at the start)", na, nb)
	}
}

// modelPending is the edge's count of requests queued for model.
func modelPending(e *stack.Edge, model string) int {
	for _, m := range e.Dispatcher.Status().Models {
		if m.Name == model {
			return m.Pending
		}
	}
	return -1
}
