package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// No candidate is excluded by provider type alone (wire contract,
// provider-pool mixed dispatch): a plain chat request to a model whose
// candidates are a tunnelled vllm provider and a run-only mock goes to
// whichever has room, under the same lease, and each answers it on its own
// path. Routing is ordered with one slot each, so the second candidate is
// taken only when the first is busy: the tunnel first, then the run, and
// in a second model the other way round.
func TestMixedPoolServesPlainChatOnEitherPath(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/chat/completions") {
			<-release // hold the tunnel's slot until the run was served
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	vllm := vllmProvider("vllm", up.baseURL())
	vllm.Capacity = 1
	mock := mockProvider("mock", map[string]any{"delay_ms": 100})
	mock.Capacity = 1
	mixed := config.ModelSpec{Name: "mixed", Routing: "ordered", QueueTimeoutSec: 30, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "vllm", Target: target},
		{Node: nodeID, Provider: "mock", Target: "m"},
	}}
	runFirst := config.ModelSpec{Name: "run-first", Routing: "ordered", QueueTimeoutSec: 30, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "mock", Target: "m"},
		{Node: nodeID, Provider: "vllm", Target: target},
	}}
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{vllm, mock}, mixed, runFirst))

	// The tunnel candidate takes the first request and holds it.
	held := postAsync(t, e, "/v1/chat/completions", `{"model":"mixed","messages":[{"role":"user","content":"first"}]}`)
	stack.WaitFor(t, waitLong, "the tunnel to hold its slot", func() bool { return inFlight(e, "vllm") == 1 })
	// The run candidate takes the next one.
	r := post(t, e, "/v1/chat/completions", `{"model":"mixed","messages":[{"role":"user","content":"second"}]}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"content":"second"`) {
		t.Fatalf("with the tunnel busy: %d %s, want the mock's echo", r.Status, r.Body)
	}
	close(release)
	if r := waitFor(t, held, waitLong, "the tunnelled answer"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "How can I help") {
		t.Fatalf("tunnelled: %d %s", r.Status, r.Body)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("upstream saw %d requests, want 1 (the second went to the run candidate)", n)
	}
	waitReleased(t, e, "vllm")

	// The other order: the run candidate first, held by a slow stream; the
	// next request is tunnelled.
	_, _, hangUp := openStream(t, e.URL+"/v1/chat/completions",
		`{"model":"run-first","stream":true,"messages":[{"role":"user","content":"`+strings.Repeat("w ", 100)+`"}]}`)
	defer hangUp()
	if inFlight(e, "mock") != 1 {
		t.Fatalf("the stream holds no mock slot (mock %d, vllm %d)", inFlight(e, "mock"), inFlight(e, "vllm"))
	}
	r = post(t, e, "/v1/chat/completions", `{"model":"run-first","messages":[{"role":"user","content":"third"}]}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "How can I help") {
		t.Fatalf("with the run busy: %d %s, want the upstream's answer", r.Status, r.Body)
	}
}
