package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A request the response timeout ended is counted under the 502 it was
// answered with (a provider failure), not as cancelled.
func TestResponseTimeoutCountedAs502(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Limits.ResponseTimeoutSec = 1
	e := startEdge(t, cfg)
	startFakeNode(t, e, silent)
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	stack.WaitFor(t, waitLong, "the request counted as 502", func() bool { return requestsWithCode(t, e, "502") == 1 })
	if got := requestsWithCode(t, e, "cancelled"); got != 0 {
		t.Errorf("requests counted cancelled: %v, want 0", got)
	}
	if got := cancellations(t, e, "timeout"); got != 1 {
		t.Errorf("timeout cancellations = %v, want 1", got)
	}
}

// Only the API surface (/v1/...) is counted in iop_requests_total: probes,
// scrapes and the admin API are not requests to a model.
func TestOnlyAPIRequestsCounted(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	c := httpClient(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/admin/status", "/nope"} {
		_ = do(t, c, http.MethodGet, e.URL+path, "", nil)
	}
	if r := do(t, c, http.MethodGet, e.URL+"/v1/models", "", nil); r.Status != http.StatusOK {
		t.Fatalf("/v1/models: %d", r.Status)
	}
	// The /v1 request is counted after its answer: wait for it, then no
	// other may be counted.
	stack.WaitFor(t, waitLong, "/v1/models counted", func() bool { return requestsWithCode(t, e, "200") >= 1 })
	total := 0.0
	for _, code := range []string{"200", "404", "503", "401"} {
		total += requestsWithCode(t, e, code)
	}
	if total != 1 {
		t.Errorf("iop_requests_total counts %v requests, want only the /v1 one", total)
	}
}

// A node lost after it took a tunnel request and before it answered is
// reported as such: 502 upstream_error naming the lost node.
func TestNodeLostBeforeAnswerMessage(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = n.cc.Close()
	})
	r := post(t, e, "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	assertError(t, r, http.StatusBadGateway, "upstream_error")
	var env struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &env)
	if want := "The provider's node was lost before it answered."; env.Error.Message != want {
		t.Errorf("message %q, want %q", env.Error.Message, want)
	}
}
