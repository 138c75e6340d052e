package texttool

import (
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func sysText(s string) *iop.ChatMessage {
	return &iop.ChatMessage{Role: iop.ChatRole_CHAT_ROLE_SYSTEM, Content: []*iop.ContentPart{textPart(s)}}
}

// A tool whose parameters are JSON null is offered with an empty object
// schema, not "null", which a model would copy as its arguments.
func TestInstructionNullParametersAreAnEmptyObject(t *testing.T) {
	in := &iop.RunInput{Tools: []*iop.ToolDefinition{{Name: "now", Parameters: []byte("null")}}}
	got := Instruction(in)
	if !strings.Contains(got, "Parameters (JSON schema): {\"type\": \"object\", \"properties\": {}}\n") {
		t.Fatalf("instruction %q", got)
	}
}

// A system message made of one image keeps the image: the instruction is
// added as a text part beside it.
func TestInstructionBesideASystemImage(t *testing.T) {
	img := &iop.ContentPart{Part: &iop.ContentPart_Image{Image: &iop.ImagePart{}}}
	in := &iop.RunInput{
		Messages: []*iop.ChatMessage{{Role: iop.ChatRole_CHAT_ROLE_SYSTEM, Content: []*iop.ContentPart{img}}},
		Tools:    []*iop.ToolDefinition{{Name: "f"}},
	}
	out, _ := Input(in)
	c := out.GetMessages()[0].GetContent()
	if len(c) != 2 || c[0].GetImage() == nil || !strings.HasPrefix(c[1].GetText(), "# Tools") {
		t.Fatalf("system content %v", c)
	}
}

// An assistant turn with text and tool calls keeps its text first, then
// the calls, as the model wrote them; its name stays.
func TestHistoryAssistantTextBeforeCalls(t *testing.T) {
	in := &iop.RunInput{
		Messages: []*iop.ChatMessage{sysText("s"), {
			Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, Name: "bot",
			Content:   []*iop.ContentPart{textPart("Let me look.")},
			ToolCalls: []*iop.ToolCall{{Id: "c1", Name: "f", Arguments: `{"a":1}`}},
		}},
		Tools: []*iop.ToolDefinition{{Name: "f"}},
	}
	out, _ := Input(in)
	m := out.GetMessages()[1]
	if got := adapter.MessageText(m); got != "Let me look.\n<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}</tool_call>" {
		t.Fatalf("assistant text %q", got)
	}
	if m.GetName() != "bot" {
		t.Fatalf("name %q, want bot", m.GetName())
	}
}
