package gateway_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A model whose candidates mix an OpenAI-compatible provider and run-only
// ones serves /v1/responses and n > 1 from the capable candidate every
// time, under load, however idle (and however preferred) the others are;
// 400 comes only when no candidate of the model can serve the request.
func TestMixedGroupRoutesByCapability(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/responses") {
			writeJSON(w, http.StatusOK, `{"id":"resp_1","object":"response","status":"completed","model":"`+target+`","output":[]}`)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	vllm := vllmProvider("vllm", up.baseURL())
	vllm.Capacity = 2
	mock := mockProvider("mock", map[string]any{"delay_ms": 5})
	mock.Capacity = 8
	mixed := config.ModelSpec{Name: "mixed", QueueTimeoutSec: 30, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "mock", Target: "m"}, // preferred and roomier, but run-only
		{Node: nodeID, Provider: "vllm", Target: target},
	}}
	runOnly := modelOn("run-only", "mock", "m")
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{mock, vllm}, mixed, runOnly))

	bodies := []struct{ path, body string }{
		{"/v1/responses", `{"model":"mixed","input":"hi"}`},
		{"/v1/chat/completions", `{"model":"mixed","n":2,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"mixed","messages":[{"role":"user","content":"plain"}]}`},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	c := httpClient(t)
	for i := range 60 {
		b := bodies[i%len(bodies)]
		wg.Add(1)
		go func() { // Owner: the test; ends with its request.
			defer wg.Done()
			r, err := tryDo(ctxT(t), c, http.MethodPost, e.URL+b.path, b.body, nil)
			if err != nil || r.Status != http.StatusOK {
				mu.Lock()
				failures = append(failures, b.path+" "+b.body+": "+string(r.Body))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of 60 requests failed, e.g. %s", len(failures), failures[0])
	}
	// Every /v1/responses and n=2 request reached the OpenAI-compatible upstream.
	var responses, multi int
	for _, r := range up.requests() {
		switch {
		case strings.HasSuffix(r.Path, "/responses"):
			responses++
		case strings.Contains(string(r.Body), `"n":2`):
			multi++
		}
	}
	if responses != 20 || multi != 20 {
		t.Fatalf("upstream saw %d /responses and %d n=2 requests, want 20 each", responses, multi)
	}
	// A model with no capable candidate answers 400 at once.
	r := post(t, e, "/v1/responses", `{"model":"run-only","input":"hi"}`)
	assertError(t, r, http.StatusBadRequest, "invalid_request")
	r = post(t, e, "/v1/chat/completions", `{"model":"run-only","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadRequest, "invalid_request")
}
