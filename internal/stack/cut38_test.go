package stack

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testhttp"
)

// postResult is an answer postWhole read whole, or its error.
type postResult struct {
	status int
	body   string
	err    error
}

// postWhole posts body to url on a goroutine of its own; the whole answer
// comes on the channel.
func postWhole(url, body string) <-chan postResult {
	got := make(chan postResult, 1)
	// Owner: the caller's test; ends with the answer (bounded by the
	// client's timeout).
	go func() {
		c := &http.Client{Timeout: 30 * time.Second}
		r, err := c.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			got <- postResult{err: err}
			return
		}
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		got <- postResult{r.StatusCode, string(b), err}
	}()
	return got
}

// A node that stops with a request in flight that has sent its caller
// nothing yet cuts it with a terminal saying so (CAPACITY_EXCEEDED), and
// the edge moves it to the other candidate: the caller gets b's whole
// answer, counted as a failover at_capacity. Before, the edge saw the
// node's "internal adapter error" (a 502 to the caller) or the lost
// connection (a failover), whichever came first.
func TestStoppingNodeCutsWorkThatFailsOver(t *testing.T) {
	upA, hitsA := testhttp.SilentVLLM(t)
	upB := testhttp.StartHeldVLLM(t)
	upB.Free()
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{
			{ID: "a", Token: "ta", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: upA.URL + "/v1", Capacity: 2}}},
			{ID: "b", Token: "tb", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: upB.URL + "/v1", Capacity: 2}}},
		},
		Models: []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 2, QueueTimeoutSec: 20, Providers: []config.ModelProvider{
			{Node: "a", Provider: "v", Target: "t"}, {Node: "b", Provider: "v", Target: "t"}}}},
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	a := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	StartNode(t, e.NodeAddr, "b", NodeOptions{Token: "tb"})
	e.WaitReady(t, "a", 10*time.Second)
	e.WaitReady(t, "b", 10*time.Second)

	got := postWhole(e.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	WaitFor(t, 10*time.Second, "the request held at a's upstream", func() bool { return hitsA.Load() == 1 })

	if err := a.Drain(0); err != nil { // no drain: the stop cuts at once
		t.Fatal(err)
	}
	var r postResult
	select {
	case r = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after a stopped")
	}
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, `"content":"Hel"`) || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("answer: %d %v %s", r.status, r.err, r.body)
	}
	if upB.Hits.Load() != 1 {
		t.Fatalf("b's upstream hit %d times", upB.Hits.Load())
	}
	if n := failoversOf(t, e, "m", "at_capacity"); n != 1 {
		t.Fatalf("%v failovers at_capacity, want 1 (node_lost: %v)", n, failoversOf(t, e, "m", "node_lost"))
	}
}

// With no other candidate, the cut request's caller gets the node's word
// for it: a 503 no_provider_available naming the shutdown (a 502
// "tunnel cancelled" before).
func TestStoppingNodeCutsWorkWithNoOtherCandidate(t *testing.T) {
	upA, hitsA := testhttp.SilentVLLM(t)
	e := StartEdge(t, &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "a", Token: "ta", Providers: []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: upA.URL + "/v1", Capacity: 2}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "v", Target: "t"}}}},
	}, EdgeOptions{})
	a := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	e.WaitReady(t, "a", 10*time.Second)
	got := postWhole(e.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	WaitFor(t, 10*time.Second, "the request held at a's upstream", func() bool { return hitsA.Load() == 1 })
	if err := a.Drain(0); err != nil {
		t.Fatal(err)
	}
	var r postResult
	select {
	case r = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after a stopped")
	}
	if r.err != nil || r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"code":"no_provider_available"`) ||
		!strings.Contains(r.body, "it is shutting down") {
		t.Fatalf("answer: %d %v %s", r.status, r.err, r.body)
	}
}
