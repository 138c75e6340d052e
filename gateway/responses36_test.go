package gateway_test

import (
	"encoding/json"
	"fmt"
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

// vllmResponses imitates vLLM's /v1/responses as served with
// VLLM_ENABLE_RESPONSES_API_STORE=1: each server keeps the responses it
// answered in its own memory (serving_responses.py response_store), and a
// request whose previous_response_id it does not hold is answered 404
// (_make_not_found_error). Answers are vLLM's compact pydantic JSON: a
// ResponsesResponse, or named events whose first is response.created
// carrying the response (id first), and no [DONE].
type vllmResponses struct {
	*upstream
	name     string
	mu       sync.Mutex
	store    map[string]bool
	seq      int
	busyNext atomic.Bool // answer the next /responses 503, as vLLM when its engine is overloaded
}

func newVLLMResponses(t *testing.T, name string) *vllmResponses {
	v := &vllmResponses{name: name, store: map[string]bool{}}
	v.upstream = newUpstream(t, v.serve)
	return v
}

func (v *vllmResponses) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/responses" {
		http.NotFound(w, r)
		return
	}
	if v.busyNext.CompareAndSwap(true, false) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"The engine is overloaded.","type":"ServiceUnavailableError","param":null,"code":503}}`)
		return
	}
	var req struct {
		Stream   bool    `json:"stream"`
		Previous *string `json:"previous_response_id"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"bad json","type":"BadRequestError","param":null,"code":400}}`)
		return
	}
	v.mu.Lock()
	if req.Previous != nil && !v.store[*req.Previous] {
		v.mu.Unlock()
		writeJSON(w, http.StatusNotFound, fmt.Sprintf(`{"error":{"message":"Response with id '%s' not found.","type":"invalid_request_error","param":"response_id","code":404}}`, *req.Previous))
		return
	}
	v.seq++
	id := fmt.Sprintf("resp_%s%030d", v.name, v.seq) // "resp_" and 32 characters, as vLLM's random_uuid
	v.mu.Unlock()
	prev := "null"
	if req.Previous != nil {
		prev = `"` + *req.Previous + `"`
	}
	head := `{"id":"` + id + `","created_at":1727000000,"incomplete_details":null,"instructions":null,"metadata":null,"model":"` + target + `","object":"response",`
	tail := `"parallel_tool_calls":true,"temperature":1.0,"tool_choice":"auto","tools":[],"top_p":1.0,"background":false,"max_output_tokens":2048,"max_tool_calls":null,"previous_response_id":` + prev + `,"prompt":null,"reasoning":null,"service_tier":"auto",`
	done := head + `"output":[{"id":"msg_1","content":[{"annotations":[],"text":"Hi from ` + v.name + `","type":"output_text","logprobs":null}],"role":"assistant","status":"completed","type":"message"}],` + tail +
		`"status":"completed","text":null,"top_logprobs":null,"truncation":"disabled","usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":16},"user":null}`
	store := func() {
		v.mu.Lock()
		v.store[id] = true
		v.mu.Unlock()
	}
	if !req.Stream {
		store()
		writeJSON(w, http.StatusOK, done)
		return
	}
	created := head + `"output":[],` + tail + `"status":"in_progress","text":null,"top_logprobs":null,"truncation":"disabled","usage":null,"user":null}`
	writeSSE(w,
		"event: response.created\ndata: {\"response\":"+created+",\"sequence_number\":0,\"type\":\"response.created\"}\n\n",
		"event: response.in_progress\ndata: {\"response\":"+created+",\"sequence_number\":1,\"type\":\"response.in_progress\"}\n\n",
		"event: response.output_text.delta\ndata: {\"content_index\":0,\"delta\":\"Hi from "+v.name+"\",\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":2,\"type\":\"response.output_text.delta\"}\n\n",
	)
	store() // vLLM stores the final response once the stream has it
	_, _ = fmt.Fprintf(w, "event: response.completed\ndata: {\"response\":%s,\"sequence_number\":3,\"type\":\"response.completed\"}\n\n", done)
}

// responsesPair is model "m" on the vLLM providers of nodes a and b, a
// first (ordered routing: without an earlier response, a serves), with
// failover over both.
func responsesPair(t *testing.T) (e *stack.Edge, a, b *vllmResponses, nodeA, nodeB *stack.Node) {
	t.Helper()
	a, b = newVLLMResponses(t, "a"), newVLLMResponses(t, "b")
	e, nodeA, nodeB = startResponsesPair(t, a, b)
	return e, a, b, nodeA, nodeB
}

// startResponsesPair starts responsesPair's edge and nodes over a and b.
func startResponsesPair(t *testing.T, a, b *vllmResponses) (e *stack.Edge, nodeA, nodeB *stack.Node) {
	t.Helper()
	prov := func(u *vllmResponses) []config.ProviderSpec {
		return []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: 4}}
	}
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "ta", Providers: prov(a)}, {ID: "b", Token: "tb", Providers: prov(b)}},
		Models: []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 2, Providers: []config.ModelProvider{
			{Node: "a", Provider: "v", Target: target}, {Node: "b", Provider: "v", Target: target}}}},
	}
	e = startEdge(t, cfg)
	nodeA = stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: nodeEnv})
	nodeB = stack.StartNode(t, e.NodeAddr, "b", stack.NodeOptions{Token: "tb", Getenv: nodeEnv})
	e.WaitReady(t, "a", waitLong)
	e.WaitReady(t, "b", waitLong)
	return e, nodeA, nodeB
}

// ask posts a /v1/responses request and returns the answer's id (from
// the body, or from the stream's response.created event) and which
// server answered ("a", "b"; "" for an error answer).
func ask(t *testing.T, e *stack.Edge, prev string, stream bool) (status int, id, by string, body string) {
	t.Helper()
	req := `{"model":"m","input":"Tell me more.","stream":` + fmt.Sprint(stream)
	if prev != "" {
		req += `,"previous_response_id":"` + prev + `"`
	}
	r := post(t, e, "/v1/responses", req+"}")
	body = string(r.Body)
	if r.Status != http.StatusOK {
		return r.Status, "", "", body
	}
	js := body
	if stream {
		ev := readEvents(t, r.Body)
		if len(ev) == 0 {
			t.Fatalf("empty stream: %q", body)
		}
		js = ev[0]
	}
	var got struct {
		ID       string `json:"id"`
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("answer %q: %v", js, err)
	}
	id = got.ID + got.Response.ID
	by = strings.TrimPrefix(id, "resp_")[:1]
	return r.Status, id, by, body
}

// A conversation that began on b (a was overloaded and the first request
// failed over) continues on b although routing prefers a: every
// follow-up, streamed or not, reaches the server that stored its
// predecessor, learnt from the answer's body or from its stream's
// response.created event. A new conversation still starts on a and stays
// there. Before, every follow-up went to a, which answered 404.
func TestResponsesFollowUpReachesItsProvider36(t *testing.T) {
	e, a, b, _, _ := responsesPair(t)

	a.busyNext.Store(true)
	_, id, by, body := ask(t, e, "", false)
	if by != "b" {
		t.Fatalf("first request answered by %q, want b after a's 503: %s", by, body)
	}
	for i, stream := range []bool{false, true, true, false} {
		status, next, by, body := ask(t, e, id, stream)
		if status != http.StatusOK || by != "b" {
			t.Fatalf("follow-up %d (stream %v) of %s: %d by %q: %s", i, stream, id, status, by, body)
		}
		id = next
	}
	if n := len(a.requests()); n != 1 {
		t.Fatalf("a saw %d requests, want only the first (its 503)", n)
	}

	// A new conversation starts on a (ordered) and its follow-ups stay.
	_, id, by, _ = ask(t, e, "", true)
	if by != "a" {
		t.Fatalf("a new conversation went to %q", by)
	}
	for i, stream := range []bool{true, false} {
		status, next, by, body := ask(t, e, id, stream)
		if status != http.StatusOK || by != "a" {
			t.Fatalf("follow-up %d on a: %d by %q: %s", i, status, by, body)
		}
		id = next
	}
	if n := len(b.requests()); n != 5 {
		t.Fatalf("b saw %d requests, want 5", n)
	}
}

// The provider holding the previous response fails before its first
// byte (503): failover (max_attempts 2) still sends the follow-up on, to
// a, whose own answer (vLLM's 404: it holds no such response) the client
// gets.
func TestResponsesPinnedProviderFailsOver36(t *testing.T) {
	e, a, b, _, _ := responsesPair(t)
	a.busyNext.Store(true)
	_, id, by, _ := ask(t, e, "", false)
	if by != "b" {
		t.Fatalf("first request answered by %q", by)
	}
	b.busyNext.Store(true)
	status, _, _, body := ask(t, e, id, false)
	if status != http.StatusNotFound || !strings.Contains(body, "Response with id '"+id+"' not found.") {
		t.Fatalf("follow-up after b's 503: %d %s", status, body)
	}
	if na, nb := len(a.requests()), len(b.requests()); na != 2 || nb != 2 {
		t.Fatalf("a saw %d requests, b %d; want 2 each (b's 503, then a)", na, nb)
	}
}

// The provider holding the previous response is drained (its node
// leaves): the follow-up is routed as usual, to a, and a's own answer
// reaches the client.
func TestResponsesPinnedProviderGone36(t *testing.T) {
	e, a, _, _, nodeB := responsesPair(t)
	a.busyNext.Store(true)
	_, id, by, _ := ask(t, e, "", true)
	if by != "b" {
		t.Fatalf("first request answered by %q", by)
	}
	if err := nodeB.Drain(30 * time.Second); err != nil {
		t.Fatalf("drain b: %v", err)
	}
	stack.WaitFor(t, waitLong, "b gone", func() bool {
		for _, n := range e.Dispatcher.Status().Nodes {
			if n.ID == "b" {
				return !n.Connected
			}
		}
		return true
	})
	status, _, _, body := ask(t, e, id, false)
	if status != http.StatusNotFound || len(a.requests()) != 2 {
		t.Fatalf("follow-up with b gone: %d %s (a saw %d requests)", status, body, len(a.requests()))
	}
}
