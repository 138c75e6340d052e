package gateway_test

import (
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// A middle assistant turn that thought and answered empty text reaches
// Ollama on the run path as an assistant message with empty content and
// its thinking; through a vLLM tunnel too, as the message's reasoning.
func TestEmptyTurnThinkingReachesOllama(t *testing.T) {
	e, u := histOllamaStack(t)
	an := anClient(t, e, "")
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	msgs := []anthropic.MessageParam{
		userText("Hi"),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgC", "Nothing to say yet."), anthropic.NewTextBlock("")),
		userText("Weather in Paris?"),
	}
	if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "qwen", MaxTokens: 2048,
		Tools: []anthropic.ToolUnionParam{tool}, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	bodies := histOllamaBodies(u, "/api/chat")
	got := histOllamaMessages(t, bodies[len(bodies)-1])
	if len(got) != 3 || got[1]["role"] != "assistant" || got[1]["content"] != "" || got[1]["thinking"] != "Nothing to say yet." || got[2]["content"] != "Weather in Paris?" {
		t.Errorf("Ollama got messages %v", got)
	}

	tu := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, tu)
	tan := anClient(t, s.Edge, "")
	if _, err := tan.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	reqs := tu.requests()
	if len(reqs) != 1 {
		t.Fatalf("tunnel requests %d", len(reqs))
	}
	jsonEqual(t, string(reqs[0].Body), `{"model":"`+target+`","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"","reasoning":"Nothing to say yet."},{"role":"user","content":"Weather in Paris?"}],"max_tokens":64}`)
}
