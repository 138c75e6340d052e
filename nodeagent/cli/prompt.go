package cli

import (
	"strings"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Prompt rendering. A CLI agent takes one plain-text prompt on stdin, so the
// OpenAI-shaped run input is flattened:
//
//   - chat: if, ignoring messages without text, there is exactly one message
//     and it is a user message, the prompt is its text verbatim. Otherwise it
//     is a transcript, one block per message, blocks separated by a blank
//     line: "System: …\n\nUser: …\n\nAssistant: …" (developer messages are
//     shown as System, tool results as Tool).
//   - chat continuing an established session: the CLI already holds the
//     conversation, so only the text of the last user message is sent.
//   - completion: the prompt string verbatim.
//
// A message's text is adapter.MessageText; images are rejected rather than
// silently dropped.

// message is one rendered chat message.
type message struct {
	role iop.ChatRole
	text string
}

// runInput is the run input, ready to render.
type runInput struct {
	completion bool
	prompt     string    // completion
	messages   []message // chat, messages with empty text removed
}

var roleLabels = map[iop.ChatRole]string{
	iop.ChatRole_CHAT_ROLE_SYSTEM:    "System",
	iop.ChatRole_CHAT_ROLE_DEVELOPER: "System",
	iop.ChatRole_CHAT_ROLE_USER:      "User",
	iop.ChatRole_CHAT_ROLE_ASSISTANT: "Assistant",
	iop.ChatRole_CHAT_ROLE_TOOL:      "Tool",
}

// parseInput validates the run input of a chat or completion run.
func parseInput(op iop.RunOperation, input *iop.RunInput) (*runInput, error) {
	if op == adapter.OpCompletion {
		return &runInput{completion: true, prompt: input.GetPrompt()}, nil
	}
	if len(input.GetMessages()) == 0 {
		return nil, invalidRequest("messages must not be empty")
	}
	in := &runInput{}
	for i, m := range input.GetMessages() {
		if _, ok := roleLabels[m.GetRole()]; !ok {
			return nil, invalidRequest("messages[%d]: unsupported role %s", i, m.GetRole())
		}
		if len(adapter.MessageImages(m)) > 0 {
			// Dropping them silently would answer a question the caller
			// did not ask.
			return nil, invalidRequest("messages[%d]: only text content is supported by this provider", i)
		}
		if text := adapter.MessageText(m); text != "" {
			in.messages = append(in.messages, message{role: m.GetRole(), text: text})
		}
	}
	if len(in.messages) == 0 {
		return nil, invalidRequest("messages carry no text")
	}
	return in, nil
}

// render returns the prompt for a fresh run (resume=false) or for a run that
// continues an established session (resume=true).
func (in *runInput) render(resume bool) (string, error) {
	if in.completion {
		return in.prompt, nil
	}
	if resume {
		for i := len(in.messages) - 1; i >= 0; i-- {
			if in.messages[i].role == iop.ChatRole_CHAT_ROLE_USER {
				return in.messages[i].text, nil
			}
		}
		return "", invalidRequest("continuing a session needs a user message")
	}
	if len(in.messages) == 1 && in.messages[0].role == iop.ChatRole_CHAT_ROLE_USER {
		return in.messages[0].text, nil
	}
	var b strings.Builder
	for i, m := range in.messages {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(roleLabels[m.role])
		b.WriteString(": ")
		b.WriteString(m.text)
	}
	return b.String(), nil
}
