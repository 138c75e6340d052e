package edgeapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/internal/testredis"
)

const (
	respKeyEnv = "VLLM_API_KEY"
	respTarget = "Qwen/Qwen2.5-7B-Instruct"
)

// storingVLLM imitates vLLM's non-streamed /v1/responses with
// VLLM_ENABLE_RESPONSES_API_STORE=1: it keeps the responses it answered
// in its own memory, and answers a previous_response_id it does not hold
// 404 with _make_not_found_error's body (serving_responses.py):
// {"error":{"message":"Response with id '<id>' not found.",
// "type":"invalid_request_error","param":"response_id","code":404}}.
// Its ids are "resp_", its name and digits, 37 bytes as vLLM's. busyNext
// answers the next request 503, as vLLM with its engine overloaded;
// holdNext, when set, holds the next request until it is closed (or the
// request ends); beforeNext, when set, runs before the next request is
// served. notFound counts its 404s.
type storingVLLM struct {
	*httptest.Server
	name       string
	busyNext   atomic.Bool
	holdNext   atomic.Pointer[chan struct{}]
	beforeNext atomic.Pointer[func()]
	notFound   atomic.Int32
	mu         sync.Mutex
	store      map[string]bool
	seq        int
}

func newStoringVLLM(t *testing.T, name string) *storingVLLM {
	v := &storingVLLM{name: name, store: map[string]bool{}}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	return v
}

func (v *storingVLLM) serve(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	switch {
	case r.URL.Path == "/health":
		w.WriteHeader(http.StatusOK)
		return
	case r.URL.Path != "/v1/responses":
		http.NotFound(w, r)
		return
	case v.busyNext.CompareAndSwap(true, false):
		answer(http.StatusServiceUnavailable, `{"error":{"message":"The engine is overloaded.","type":"ServiceUnavailableError","param":null,"code":503}}`)
		return
	}
	if before := v.beforeNext.Swap(nil); before != nil {
		(*before)()
	}
	if hold := v.holdNext.Swap(nil); hold != nil {
		select {
		case <-*hold:
		case <-r.Context().Done():
			return
		}
	}
	var req struct {
		Previous *string `json:"previous_response_id"`
		Stream   bool    `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		answer(http.StatusBadRequest, `{"error":{"message":"bad json","type":"BadRequestError","param":null,"code":400}}`)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if req.Previous != nil && !v.store[*req.Previous] {
		v.notFound.Add(1)
		answer(http.StatusNotFound, fmt.Sprintf(`{"error":{"message":"Response with id '%s' not found.","type":"invalid_request_error","param":"response_id","code":404}}`, *req.Previous))
		return
	}
	v.seq++
	id := fmt.Sprintf("resp_%s%031d", v.name, v.seq)
	v.store[id] = true
	prev := "null"
	if req.Previous != nil {
		prev = `"` + *req.Previous + `"`
	}
	if req.Stream {
		v.stream(w, id)
		return
	}
	answer(http.StatusOK, `{"id":"`+id+`","created_at":1727000000,"incomplete_details":null,"instructions":null,"metadata":null,"model":"`+respTarget+`","object":"response",`+
		`"output":[{"id":"msg_1","content":[{"annotations":[],"text":"Hi from `+v.name+`","type":"output_text","logprobs":null}],"role":"assistant","status":"completed","type":"message"}],`+
		`"parallel_tool_calls":true,"temperature":1.0,"tool_choice":"auto","tools":[],"top_p":1.0,"background":false,"max_output_tokens":2048,"max_tool_calls":null,"previous_response_id":`+prev+`,"prompt":null,"reasoning":null,"service_tier":"auto",`+
		`"status":"completed","text":null,"top_logprobs":null,"truncation":"disabled","usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":16},"user":null}`)
}

// stream answers as vLLM streams a Responses answer: response.created
// (the id), a text delta, response.completed, each event flushed alone.
func (v *storingVLLM) stream(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	resp := `{"id":"` + id + `","created_at":1727000000,"model":"` + respTarget + `","object":"response","output":[],"status":"%s"}`
	for _, ev := range []struct{ name, data string }{
		{"response.created", `{"response":` + fmt.Sprintf(resp, "in_progress") + `,"sequence_number":0,"type":"response.created"}`},
		{"response.output_text.delta", `{"content_index":0,"delta":"Hi from ` + v.name + `","item_id":"msg_1","output_index":0,"sequence_number":1,"type":"response.output_text.delta"}`},
		{"response.completed", `{"response":` + fmt.Sprintf(resp, "completed") + `,"sequence_number":2,"type":"response.completed"}`},
	} {
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		w.(http.Flusher).Flush()
	}
}

// clusterResponsesCfg is model m on the vLLM providers of nodes a and b,
// a first (ordered), with failover, its leases shared through redisAddr
// under key prefix "dep".
func clusterResponsesCfg(redisAddr string, a, b *storingVLLM) *config.Edge {
	prov := func(v *storingVLLM) []config.ProviderSpec {
		return []config.ProviderSpec{{Name: "v", Type: "vllm", BaseURL: v.URL + "/v1", APIKeyEnv: respKeyEnv, Capacity: 4}}
	}
	return &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "ta", Providers: prov(a)}, {ID: "b", Token: "tb", Providers: prov(b)}},
		Models: []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 2, Providers: []config.ModelProvider{
			{Node: "a", Provider: "v", Target: respTarget}, {Node: "b", Provider: "v", Target: respTarget}}}},
		Cluster: config.Cluster{Redis: config.ClusterRedis{Address: redisAddr, LeaseTTLSec: 5, TimeoutMS: 1000, KeyPrefix: "dep"}},
	}
}

// respEnv is the nodes' environment: the upstream's key.
func respEnv(name string) string {
	if name == respKeyEnv {
		return "sk-upstream"
	}
	return ""
}

// startResponsesPair is two edges of clusterResponsesCfg on the Redis at
// redisAddr (b's provider with bCap slots; 0: as configured) and nodes a
// and b connected to both, ready on each.
func startResponsesPair(t *testing.T, redisAddr string, a, b *storingVLLM, bCap int) (edgeA, edgeB *stack.Edge) {
	t.Helper()
	cfg := func() *config.Edge {
		c := clusterResponsesCfg(redisAddr, a, b)
		if bCap > 0 {
			c.Nodes[1].Providers[0].Capacity = bCap
		}
		return c
	}
	edgeA = stack.StartEdge(t, cfg(), stack.EdgeOptions{})
	edgeB = stack.StartEdge(t, cfg(), stack.EdgeOptions{})
	stack.StartNode(t, edgeA.NodeAddr, "a", stack.NodeOptions{Token: "ta", Getenv: respEnv, MoreEdges: []string{edgeB.NodeAddr}})
	stack.StartNode(t, edgeA.NodeAddr, "b", stack.NodeOptions{Token: "tb", Getenv: respEnv, MoreEdges: []string{edgeB.NodeAddr}})
	for _, e := range []*stack.Edge{edgeA, edgeB} {
		e.WaitReady(t, "a", 10*time.Second)
		e.WaitReady(t, "b", 10*time.Second)
	}
	return edgeA, edgeB
}

// startOnB begins a conversation on b through e (a answers 503, the
// request fails over) and returns b's response id.
func startOnB(t *testing.T, e *stack.Edge, a *storingVLLM) string {
	t.Helper()
	a.busyNext.Store(true)
	status, id, body := askResponses(t, e, "")
	if status != http.StatusOK || !strings.HasPrefix(id, "resp_b") {
		t.Fatalf("first request: %d %q, want b's answer after a's 503: %s", status, id, body)
	}
	return id
}

// responsesBody is a non-streamed /v1/responses request for m, following
// up prev unless it is "".
func responsesBody(prev string) string {
	req := `{"model":"m","input":"Tell me more."`
	if prev != "" {
		req += `,"previous_response_id":"` + prev + `"`
	}
	return req + "}"
}

// askResponses posts a non-streamed /v1/responses request to e and
// returns the status, the answer's id and its body.
func askResponses(t *testing.T, e *stack.Edge, prev string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(e.URL+"/v1/responses", "application/json", strings.NewReader(responsesBody(prev)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct {
		ID string `json:"id"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("answer %q: %v", body, err)
		}
	}
	return resp.StatusCode, got.ID, string(body)
}

// Two edges behind a balancer share one Redis: a conversation that began
// on b through edge A (a was overloaded) continues on b when its
// follow-up reaches edge B, which never saw it. Before, edge B routed the
// follow-up as usual, to a, which answered 404.
func TestFollowUpThroughAnotherEdge37a(t *testing.T) {
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	a, b := newStoringVLLM(t, "a"), newStoringVLLM(t, "b")
	edgeA, edgeB := startResponsesPair(t, rs.Addr, a, b, 0)
	id := startOnB(t, edgeA, a)
	for i, e := range []*stack.Edge{edgeB, edgeB, edgeA} {
		// The edge that relayed id shares it once the answer has gone
		// (asynchronously, one Redis round trip later): a follow-up
		// reaching another edge before that is routed as usual.
		stack.WaitFor(t, 10*time.Second, "the id in Redis", func() bool {
			return rdb.Exists(context.Background(), "dep:resp:"+id).Val() == 1
		})
		status, next, body := askResponses(t, e, id)
		if status != http.StatusOK || !strings.HasPrefix(next, "resp_b") {
			t.Fatalf("follow-up %d of %s: %d %q: %s", i, id, status, next, body)
		}
		id = next
	}
}
