package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// lazyThinking is the earlier thinking a Messages conversation sends back.
const lazyThinking = "Greet back, briefly."

// lazyOllamaBusy is Ollama's answer when its queue is full.
const lazyOllamaBusy = `{"error":"server busy, please try again.  maximum pending requests exceeded"}`

// A Messages conversation with earlier thinking fails over tunnel, run,
// tunnel: both tunnelled vLLM providers get the thinking as the assistant
// turn's reasoning, the same bytes both times (the run rendering, reused),
// and the run between them gets the thinking (Ollama's thinking member of
// the assistant message).
func TestMessagesFailoverTunnelRunTunnel(t *testing.T) {
	first, ol, third, e := busyVLLMOllamaThenVLLM(t, vllmChatJSON)

	an := anClient(t, e, "")
	msg, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Messages: []anthropic.MessageParam{
		userText("Hi"),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgC", lazyThinking), anthropic.NewTextBlock("Hello!")),
		userText("More"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello! How can I help you today?" {
		t.Fatalf("answer %+v", msg.Content)
	}
	a, b := first.requests(), third.requests()
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("tunnel requests: first %d, third %d", len(a), len(b))
	}
	for _, body := range [][]byte{a[0].Body, b[0].Body} {
		if !bytes.Contains(body, []byte(`"content":"Hello!","reasoning":"`+lazyThinking+`"`)) || bytes.Contains(body, []byte("EqQBCkYIBxgC")) {
			t.Errorf("tunnel body %s", body)
		}
	}
	if !bytes.Equal(a[0].Body, b[0].Body) {
		t.Errorf("the tunnels got different bodies:\n%s\n%s", a[0].Body, b[0].Body)
	}
	bodies := histOllamaBodies(ol, "/api/chat")
	if len(bodies) != 1 {
		t.Fatalf("Ollama got %d chat requests", len(bodies))
	}
	got := histOllamaMessages(t, bodies[0])
	if len(got) != 3 || got[1]["role"] != "assistant" || got[1]["content"] != "Hello!" || got[1]["thinking"] != lazyThinking {
		t.Errorf("Ollama got messages %v", got)
	}
	if n := metric(t, e.Registry, "iop_failovers_total", map[string]string{"model": "m", "reason": "unavailable"}); n != 2 {
		t.Errorf("failovers %v, want 2", n)
	}
	for _, p := range []string{"first", "mid", "third"} {
		waitReleased(t, e, p)
	}
	if strings.Contains(string(msg.RawJSON()), lazyThinking) {
		t.Errorf("the earlier thinking came back in the answer: %s", msg.RawJSON())
	}
}

// busyVLLMOllamaThenVLLM starts a stack whose model m tries, in order, a
// vLLM imitation answering 503, an Ollama imitation whose chat is busy
// (503), and a vLLM imitation answering answer.
func busyVLLMOllamaThenVLLM(t *testing.T, answer string) (first, ol, third *upstream, e *stack.Edge) {
	t.Helper()
	first = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"engine overloaded","type":"ServiceUnavailableError","param":null,"code":503}}`)
	})
	third = newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, answer) })
	ol = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/version":
			writeJSON(w, http.StatusOK, `{"version":"0.12.6"}`)
		case "/api/chat":
			writeJSON(w, http.StatusServiceUnavailable, lazyOllamaBusy)
		default:
			http.Error(w, "404 page not found", http.StatusNotFound)
		}
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("first", first.baseURL()),
		{Name: "mid", Type: "ollama", BaseURL: ol.URL, Capacity: 4}, vllmProvider("third", third.baseURL())})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 3, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "first", Target: target}, {Node: nodeID, Provider: "mid", Target: target},
		{Node: nodeID, Provider: "third", Target: target}}}}
	e, _ = startStack(t, cfg)
	return first, ol, third, e
}
