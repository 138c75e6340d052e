package gateway_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// Thinking off follows each attempt's provider across failover: a Messages
// request with tools fails over from a vLLM run (tool_mode auto, its
// adapter passes extra members upstream) to Ollama and on to another vLLM
// run. Only Ollama is told think: false; neither vLLM body carries
// reasoning_effort, before or after the Ollama attempt.
func TestMessagesThinkingOffFollowsFailover(t *testing.T) {
	busy := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"engine overloaded","type":"ServiceUnavailableError","param":null,"code":503}}`)
	}
	first := newUpstream(t, busy)
	third := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmToolCallJSON) })
	ol := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
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
	e, _ := startStack(t, cfg)

	off := anthropic.NewThinkingConfigDisabledParam()
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	an := anClient(t, e, "")
	msg, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
		Thinking: anthropic.ThinkingConfigParamUnion{OfDisabled: &off}, Tools: []anthropic.ToolUnionParam{tool},
		Messages: []anthropic.MessageParam{userText("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(msg.Content); n == 0 || msg.Content[n-1].Type != "tool_use" {
		t.Fatalf("answer %+v", msg.Content)
	}
	bodies := histOllamaBodies(ol, "/api/chat")
	if len(bodies) != 1 {
		t.Fatalf("Ollama got %d chat requests", len(bodies))
	}
	if got := string(bodies[0]["think"]); got != "false" {
		t.Errorf("Ollama got think %q, want false", got)
	}
	for name, u := range map[string]*upstream{"first": first, "third": third} {
		reqs := u.requests()
		if len(reqs) != 1 {
			t.Fatalf("%s got %d requests", name, len(reqs))
		}
		if bytes.Contains(reqs[0].Body, []byte("reasoning_effort")) {
			t.Errorf("%s got %s", name, reqs[0].Body)
		}
	}
}
