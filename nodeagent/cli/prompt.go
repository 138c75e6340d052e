package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/iop-gateway/iop/nodeagent/adapter"
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
//   - completion: the prompt string verbatim (an array holding one string is
//     accepted too).
//
// Message content may be a string, null, or an array of parts; only text
// parts are supported, anything else (images, audio) is rejected rather than
// silently dropped.

// message is one rendered chat message.
type message struct {
	role string // as sent by the caller
	text string
}

// runInput is the decoded run input, ready to render.
type runInput struct {
	completion bool
	prompt     string    // completion
	messages   []message // chat, messages with empty text removed
}

var roleLabels = map[string]string{
	"system":    "System",
	"developer": "System",
	"user":      "User",
	"assistant": "Assistant",
	"tool":      "Tool",
}

// parseInput decodes and validates the run input of a chat or completion run.
func parseInput(op string, input []byte) (*runInput, error) {
	var doc struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(input, &doc); err != nil {
		return nil, invalidRequest("run input is not a valid JSON object")
	}
	if op == adapter.OpCompletion {
		p, err := completionPrompt(doc.Prompt)
		if err != nil {
			return nil, err
		}
		return &runInput{completion: true, prompt: p}, nil
	}
	if len(doc.Messages) == 0 {
		return nil, invalidRequest("messages must not be empty")
	}
	in := &runInput{}
	for i, m := range doc.Messages {
		if _, ok := roleLabels[m.Role]; !ok {
			return nil, invalidRequest("messages[%d]: unsupported role %q", i, m.Role)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, invalidRequest("messages[%d]: %s", i, err.Error())
		}
		if text != "" {
			in.messages = append(in.messages, message{role: m.Role, text: text})
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
			if in.messages[i].role == "user" {
				return in.messages[i].text, nil
			}
		}
		return "", invalidRequest("continuing a session needs a user message")
	}
	if len(in.messages) == 1 && in.messages[0].role == "user" {
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

// contentText flattens OpenAI message content: a string, null, or an array
// of parts of which only text parts are supported. Its errors are safe to
// show the caller.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errors.New("content is not a valid string")
		}
		return s, nil
	case '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", errors.New("content parts are malformed")
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return "", errors.New("only text content parts are supported, got " + quoteType(p.Type))
			}
			// Parts are concatenated as-is: OpenAI treats them as one
			// continuous text.
			b.WriteString(*p.Text)
		}
		return b.String(), nil
	default:
		return "", errors.New("content must be a string or an array of text parts")
	}
}

func quoteType(t string) string {
	if t == "" {
		return "a part without type"
	}
	b, _ := json.Marshal(t)
	return string(b)
}

// completionPrompt accepts a string, or an array holding exactly one string
// (several would ask for several completions, which one CLI run cannot give).
func completionPrompt(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", invalidRequest("prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var arr []string
	if err := json.Unmarshal(raw, &arr); err != nil || len(arr) != 1 {
		return "", invalidRequest("prompt must be a string or an array of one string")
	}
	return arr[0], nil
}
