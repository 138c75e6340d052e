package gateway_test

import (
	"bytes"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// Thinking off follows each attempt's provider across failover: a Messages
// request with tools fails over from a vLLM run (tool_mode auto, its
// adapter passes extra members upstream) to Ollama and on to another vLLM
// run. Only Ollama is told think: false; neither vLLM body carries
// reasoning_effort, before or after the Ollama attempt.
func TestMessagesThinkingOffFollowsFailover(t *testing.T) {
	first, ol, third, e := busyVLLMOllamaThenVLLM(t, vllmToolCallJSON)

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
