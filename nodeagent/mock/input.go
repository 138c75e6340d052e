package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// errBadInput marks input the mock cannot interpret; Run turns it into an
// invalid_request adapter.Error.
var errBadInput = errors.New("bad input")

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// chatText returns the last user message's text and the word count across
// all messages (every role), which stands in for prompt tokens.
func chatText(input []byte) (lastUser string, promptWords int, err error) {
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	if err := decodeObject(input, &req); err != nil {
		return "", 0, err
	}
	for i, m := range req.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			return "", 0, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		promptWords += len(strings.Fields(text))
		if m.Role == "user" {
			lastUser = text
		}
	}
	return lastUser, promptWords, nil
}

// contentText flattens an OpenAI message content: a string, null, or an
// array of parts whose "text" parts are joined by a space (other part types,
// e.g. images, carry no words and are skipped).
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: %w", errBadInput, err)
		}
		return s, nil
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", fmt.Errorf("%w: content parts: %w", errBadInput, err)
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, " "), nil
	default:
		return "", fmt.Errorf("%w: content must be a string or an array of parts", errBadInput)
	}
}

// stringOrList decodes a JSON string or array of strings (the OpenAI
// "prompt" and "input" shapes). Token arrays are not supported.
func stringOrList(raw json.RawMessage, field string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, fmt.Errorf("%w: %s is required", errBadInput, field)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errBadInput, field, err)
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%w: %s must be a string or an array of strings", errBadInput, field)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: %s must not be empty", errBadInput, field)
	}
	return list, nil
}

func decodeObject(input []byte, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		return fmt.Errorf("%w: empty input", errBadInput)
	}
	if err := json.Unmarshal(input, v); err != nil {
		return fmt.Errorf("%w: %w", errBadInput, err)
	}
	return nil
}

func countWords(texts []string) int {
	n := 0
	for _, t := range texts {
		n += len(strings.Fields(t))
	}
	return n
}
