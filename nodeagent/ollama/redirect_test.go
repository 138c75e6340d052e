package ollama

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/testhttp"
	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Ollama's redirect is its answer, never followed: following it would
// carry the prompt and the node's configured headers (proxy keys; net/http
// strips only Authorization and Cookie across hosts) to another host.
func TestRedirectIsNotFollowed(t *testing.T) {
	otherURL, got := testhttp.Elsewhere(t)
	f := newFake(t)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+"/steal", http.StatusTemporaryRedirect)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, Headers: map[string]string{"X-Api-Key": "proxy-secret"}})
	_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: testinput.Chat(simpleChat)}, newSink())
	if err == nil {
		t.Fatal("a run answered by a redirect succeeded")
	}
	select {
	case h := <-got:
		t.Fatalf("the node followed Ollama's redirect to another host, sending X-Api-Key=%q", h.Get("X-Api-Key"))
	default:
	}
}
