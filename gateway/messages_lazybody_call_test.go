package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// lazyBodyServer is a server with model m on a mock provider and no node:
// enough to build calls.
func lazyBodyServer(tb testing.TB) *Server {
	tb.Helper()
	cfg := &config.Edge{
		Nodes:  []config.NodeSpec{{ID: "a", Token: "t", Providers: []config.ProviderSpec{{Name: "p", Type: "mock"}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "p", Target: "x"}}}},
	}
	if err := cfg.Normalize(); err != nil {
		tb.Fatal(err)
	}
	return New(Options{Config: cfg, Metrics: NewMetrics(prometheus.NewRegistry())})
}

// lazyBodyCall builds the call of a POST /v1/messages with body.
func lazyBodyCall(tb testing.TB, s *Server, body []byte) *call {
	tb.Helper()
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
	k := s.messagesCall(c)
	if k == nil {
		tb.Fatal("the request was refused")
	}
	return k
}

// A Messages call with earlier thinking holds the run's rendering (the
// reasoning included) until a tunnel is chosen: the run path never renders
// the tunnel's body. The tunnel's is rendered once, without reasoning, and
// reused by a later tunnel attempt; a run after it still gets the
// reasoning; prefix_affinity hashes the run rendering.
func TestMessagesCallDefersTunnelBody(t *testing.T) {
	s := lazyBodyServer(t)
	k := lazyBodyCall(t, s, []byte(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"},`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Greet back.","signature":"s"},{"type":"text","text":"Hello!"}]},`+
		`{"role":"user","content":"More"}]}`))
	if !bytes.Contains(k.body, []byte(`"reasoning":"Greet back."`)) {
		t.Fatalf("the call's body is not the run rendering: %s", k.body)
	}
	tb, err := k.tunnelBody()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(tb, []byte("reasoning")) || !bytes.Contains(tb, []byte(`"Hello!"`)) {
		t.Fatalf("tunnel body %s", tb)
	}
	again, err := k.tunnelBody()
	if err != nil || &again[0] != &tb[0] {
		t.Errorf("the tunnel body was rendered again (%v)", err)
	}
	in, err := k.parsed.RunInput()
	if err != nil {
		t.Fatal(err)
	}
	var reasoning []string
	for _, m := range in.GetMessages() {
		if m.GetRole() == iop.ChatRole_CHAT_ROLE_ASSISTANT {
			reasoning = append(reasoning, m.GetReasoning())
		}
	}
	if strings.Join(reasoning, "|") != "Greet back." {
		t.Errorf("run input reasoning after the tunnel's body: %q", reasoning)
	}

	plain := lazyBodyCall(t, s, []byte(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`))
	body := plain.body
	if tb, err := plain.tunnelBody(); err != nil || &tb[0] != &body[0] {
		t.Errorf("a body without reasoning was rendered again (%v)", err)
	}
}
