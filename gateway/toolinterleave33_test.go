package gateway_test

import (
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// A vLLM stream whose parallel tool calls interleave their argument
// fragments reaches an Anthropic SDK client as one tool_use block per
// call, in index order, with each call's whole input, and stop_reason
// tool_use; before, the stream ended with a 502 error event.
func TestMessagesInterleavedToolCalls(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w,
			chunk(`{"role":"assistant","content":""}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{\"q\":"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"other","arguments":"{\"q\":"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"a\"}"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"b\"}"}}]}`, "null"),
			chunk(`{}`, `"tool_calls"`), usageChunk(12, 9), sseDone)
	})
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })
	msg := sendMessage(t, anClient(t, s.Edge, ""), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText("Look both up")}, Tools: strictTools()}, true)
	if len(msg.Content) != 2 || msg.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("answer %+v, stop %s", msg.Content, msg.StopReason)
	}
	for i, want := range []struct{ id, name, input string }{{"call_a", "lookup", `{"q":"a"}`}, {"call_b", "other", `{"q":"b"}`}} {
		b := msg.Content[i]
		if b.Type != "tool_use" || b.ID != want.id || b.Name != want.name {
			t.Errorf("block %d: %+v", i, b)
		}
		jsonEqual(t, string(b.Input), want.input)
	}
}
