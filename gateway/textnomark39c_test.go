package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// A backend that accepts native tools and answers with a <tool_call> block
// in its content (no tool_calls) gives a run the adapter does not mark
// openai_text_tool_fallback: the edge restores text tool calls only for
// marked runs (CONTRACT §5, wire contract), so the block stays in the
// content and the run ends as the backend ended it, streamed or not.
func TestUnmarkedRunKeepsToolCallTextInContent(t *testing.T) {
	const block = `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, contentStream(`<tool_call>{"name": "get_weather", `, `"arguments": {"city": "Paris"}}`, `</tool_call>`)...)
	})
	s := toolFallbackStack(t, u)
	c := oaClient(t, s.Edge, "k")

	resp, err := c.CreateChatCompletion(ctxT(t), toolRequest)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices %+v", resp.Choices)
	}
	ch := resp.Choices[0]
	if len(ch.Message.ToolCalls) != 0 || ch.FinishReason == openai.FinishReasonToolCalls || strings.TrimSpace(ch.Message.Content) != block {
		t.Errorf("unmarked run: tool_calls %+v, finish %q, content %q; want the block kept as content", ch.Message.ToolCalls, ch.FinishReason, ch.Message.Content)
	}

	req := toolRequest
	req.Stream = true
	st, err := c.CreateChatCompletionStream(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got := readSDKStream(t, st)
	if len(got.calls) != 0 || got.finish == openai.FinishReasonToolCalls || strings.TrimSpace(got.content) != block {
		t.Errorf("unmarked stream: %d tool calls, finish %q, content %q; want the block kept as content", len(got.calls), got.finish, got.content)
	}
	// Both went out once each, with the native tools (no text retry).
	seen := u.requests()
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(seen))
	}
	for _, r := range seen {
		if !strings.Contains(string(r.Body), `"tools"`) {
			t.Errorf("a request without native tools: %s", r.Body)
		}
	}
	waitReleased(t, s.Edge, "vllm-main")
}
