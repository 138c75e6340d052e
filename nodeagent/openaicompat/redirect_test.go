package openaicompat

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testhttp"
	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A provider's redirect is its answer, never followed: following it would
// carry the prompt and the node's configured headers (proxy keys) to
// another host. A run reports it as an upstream error; a tunnel relays it.
func TestRedirectIsNotFollowed(t *testing.T) {
	otherURL, reached := testhttp.Elsewhere(t)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+"/steal", http.StatusTemporaryRedirect)
	})
	cfg := testConfig(srv.URL)
	cfg.Headers = map[string]string{"X-Api-Key": "proxy-secret"}
	inst := newTestInstance(t, TypeOpenAICompat, cfg)

	_, err := inst.Run(context.Background(), &iop.RunRequest{RunId: "r", Operation: adapter.OpChat, Target: "m",
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, &fakeRunSink{})
	if err == nil {
		t.Fatal("a run answered by a redirect succeeded")
	}
	sink := &fakeTunnelSink{}
	err = inst.Tunnel(context.Background(), &iop.ProviderTunnelRequest{
		Method: http.MethodPost, Path: "/chat/completions",
		Headers: []*iop.Header{{Name: "Content-Type", Value: "application/json"}},
		Body:    []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
	}, sink)
	if err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	if sink.status != http.StatusTemporaryRedirect || !strings.HasPrefix(sink.header.Get("Location"), otherURL) {
		t.Fatalf("tunnel relayed %d Location=%q, want the provider's 307", sink.status, sink.header.Get("Location"))
	}
	select {
	case h := <-reached:
		t.Fatalf("the node followed the provider's redirect to another host, sending X-Api-Key=%q", h.Get("X-Api-Key"))
	default:
	}
}
