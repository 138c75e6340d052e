package texttool

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An assistant turn whose tool calls the text form rewrites keeps its
// reasoning, for the adapter to send back as its backend reads it.
func TestHistoryCallKeepsReasoning(t *testing.T) {
	in := &iop.RunInput{
		Messages: []*iop.ChatMessage{
			{Role: iop.ChatRole_CHAT_ROLE_USER, Content: []*iop.ContentPart{textPart("Weather in Paris?")}},
			{Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, Reasoning: "Call get_weather.",
				ToolCalls: []*iop.ToolCall{{Id: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: iop.ChatRole_CHAT_ROLE_TOOL, ToolCallId: "c1", Content: []*iop.ContentPart{textPart("18C")}},
		},
		Tools: []*iop.ToolDefinition{{Name: "get_weather"}},
	}
	out, _ := Input(in)
	var got *iop.ChatMessage
	for _, m := range out.GetMessages() {
		if m.GetRole() == iop.ChatRole_CHAT_ROLE_ASSISTANT {
			got = m
		}
	}
	if got == nil || len(got.GetToolCalls()) != 0 || got.GetReasoning() != "Call get_weather." {
		t.Fatalf("assistant turn %v, want it in text form with its reasoning", got)
	}
}
