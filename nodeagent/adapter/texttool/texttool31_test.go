package texttool

import (
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An earlier call without arguments is written with the empty object the
// instruction asks for; JSON arguments are kept (compacted), and text that
// is not JSON is written as a JSON string rather than dropped.
func TestHistoryCallArguments(t *testing.T) {
	for args, want := range map[string]string{
		"":             `{}`,
		" \n\t":        `{}`,
		`{}`:           `{}`,
		` {"a": 1} `:   `{"a":1}`,
		`null`:         `null`,
		`{"a": "<b>"}`: `{"a":"<b>"}`,
		`not json`:     `"not json"`,
		`{"a": 1`:      `"{\"a\": 1"`,
		// Text that is not JSON is kept as the caller gave it, spaces
		// included: only JSON is trimmed.
		` not json `: `" not json "`,
		` {"a": 1`:   `" {\"a\": 1"`,
	} {
		in := &iop.RunInput{
			Messages: []*iop.ChatMessage{{
				Role:      iop.ChatRole_CHAT_ROLE_ASSISTANT,
				ToolCalls: []*iop.ToolCall{{Id: "c1", Name: "f", Arguments: args}},
			}},
			Tools: []*iop.ToolDefinition{{Name: "f"}},
		}
		out, _ := Input(in)
		got := adapter.MessageText(out.GetMessages()[1])
		if w := `<tool_call>{"name":"f","arguments":` + want + `}</tool_call>`; got != w {
			t.Errorf("arguments %q: %s, want %s", args, got, w)
		}
	}
}
