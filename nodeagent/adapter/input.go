package adapter

import (
	"strings"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The helpers below read the normalized run input (iop.RunInput) the same
// way in every adapter.

// MessageText is a message's text: its text parts joined by "\n" (as vLLM
// and Ollama join the text parts of one message), images left out.
func MessageText(m *iop.ChatMessage) string {
	parts := m.GetContent()
	if len(parts) == 1 {
		return parts[0].GetText()
	}
	var b strings.Builder
	first := true
	for _, p := range parts {
		t, ok := p.GetPart().(*iop.ContentPart_Text)
		if !ok {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		b.WriteString(t.Text)
	}
	return b.String()
}

// MessageImages are a message's image parts, in order.
func MessageImages(m *iop.ChatMessage) []*iop.ImagePart {
	var out []*iop.ImagePart
	for _, p := range m.GetContent() {
		if img := p.GetImage(); img != nil {
			out = append(out, img)
		}
	}
	return out
}

// RoleName is the OpenAI name of a chat role ("system", "developer",
// "user", "assistant", "tool"); "" for an unset role.
func RoleName(r iop.ChatRole) string {
	switch r {
	case iop.ChatRole_CHAT_ROLE_SYSTEM:
		return "system"
	case iop.ChatRole_CHAT_ROLE_DEVELOPER:
		return "developer"
	case iop.ChatRole_CHAT_ROLE_USER:
		return "user"
	case iop.ChatRole_CHAT_ROLE_ASSISTANT:
		return "assistant"
	case iop.ChatRole_CHAT_ROLE_TOOL:
		return "tool"
	}
	return ""
}

// ToolsOffered reports whether the input offers tools the model may call:
// some are defined and tool_choice is not none.
func ToolsOffered(in *iop.RunInput) bool {
	return len(in.GetTools()) > 0 && in.GetToolChoice().GetMode() != iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE
}
