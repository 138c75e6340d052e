package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// errBadInput marks a run input the adapter cannot translate; Run turns it
// into an invalid_request adapter.Error.
var errBadInput = errors.New("bad input")

// openAIChat is the part of an OpenAI chat request the adapter maps.
// Fields Ollama has no equivalent for (n, logprobs, user, stream_options,
// parallel_tool_calls, ...) are ignored.
type openAIChat struct {
	Messages       []openAIMessage   `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage   `json:"tool_choice"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	sampling
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	Name       string           `json:"name"`
	ToolCalls  []openAIToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
		// A JSON string per OpenAI; an object is accepted too.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// sampling holds the generation parameters shared by chat and completion.
type sampling struct {
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
}

// ollamaChat is the body of POST /api/chat.
type ollamaChat struct {
	Model     string            `json:"model"`
	Messages  []ollamaMessage   `json:"messages"`
	Stream    bool              `json:"stream"`
	Format    json.RawMessage   `json:"format,omitempty"`
	Tools     []json.RawMessage `json:"tools,omitempty"`
	Options   map[string]any    `json:"options,omitempty"`
	KeepAlive json.RawMessage   `json:"keep_alive,omitempty"`
}

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
}

type ollamaToolCall struct {
	Function ollamaFunction `json:"function"`
}

type ollamaFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// buildChat translates an OpenAI chat request into Ollama's /api/chat body.
// Notes on the mapping:
//   - array content: text parts are joined with "\n"; image_url parts must
//     be base64 data URLs and become the message's images (Ollama cannot
//     fetch remote URLs through this adapter, so those are rejected);
//   - role "developer" is sent as "system" (Ollama templates know no
//     developer role);
//   - assistant tool_calls get object arguments; a tool message gets
//     tool_name from its name or from the call its tool_call_id answers;
//   - tool_choice "none" drops the tools; other tool_choice values cannot be
//     expressed to Ollama and are ignored;
//   - response_format json_object -> format "json", json_schema -> format
//     set to the schema.
func buildChat(input []byte, model string, cfg *config) (*ollamaChat, error) {
	var in openAIChat
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	out := &ollamaChat{Model: model, Stream: true, KeepAlive: cfg.keepAlive}
	var err error
	if out.Messages, err = convertMessages(in.Messages); err != nil {
		return nil, err
	}
	if out.Options, err = in.sampling.options(cfg); err != nil {
		return nil, err
	}
	if !toolChoiceNone(in.ToolChoice) {
		for i, t := range in.Tools {
			if t = bytes.TrimSpace(t); len(t) == 0 || t[0] != '{' {
				return nil, fmt.Errorf("%w: tools[%d] must be an object", errBadInput, i)
			}
			out.Tools = append(out.Tools, t)
		}
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			out.Format = json.RawMessage(`"json"`)
		case "json_schema":
			out.Format = json.RawMessage(`"json"`)
			if rf.JSONSchema != nil && len(bytes.TrimSpace(rf.JSONSchema.Schema)) > 0 {
				out.Format = rf.JSONSchema.Schema
			}
		default:
			return nil, fmt.Errorf("%w: response_format type %q is not supported", errBadInput, rf.Type)
		}
	}
	return out, nil
}

func convertMessages(msgs []openAIMessage) ([]ollamaMessage, error) {
	out := make([]ollamaMessage, 0, len(msgs))
	for i, m := range msgs {
		text, images, err := flattenContent(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		om := ollamaMessage{Role: m.Role, Content: text, Images: images}
		switch m.Role {
		case "developer":
			om.Role = "system"
		case "system", "user":
		case "assistant":
			for j, tc := range m.ToolCalls {
				args, err := objectArguments(tc.Function.Arguments)
				if err != nil {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d]: %w", i, j, err)
				}
				om.ToolCalls = append(om.ToolCalls, ollamaToolCall{
					Function: ollamaFunction{Name: tc.Function.Name, Arguments: args},
				})
			}
		case "tool", "function":
			// "function" is OpenAI's deprecated predecessor of "tool".
			om.Role = "tool"
			om.ToolName = m.Name
			if om.ToolName == "" && m.ToolCallID != "" {
				om.ToolName = toolNameFor(msgs[:i], m.ToolCallID)
			}
		default:
			return nil, fmt.Errorf("%w: messages[%d]: unknown role %q", errBadInput, i, m.Role)
		}
		out = append(out, om)
	}
	return out, nil
}

// toolNameFor finds the function name of the call with id, searching the
// newest messages first so a reused id resolves to its latest call.
func toolNameFor(prior []openAIMessage, id string) string {
	for i := len(prior) - 1; i >= 0; i-- {
		for _, tc := range prior[i].ToolCalls {
			if tc.ID == id {
				return tc.Function.Name
			}
		}
	}
	return ""
}

// objectArguments turns OpenAI's string-encoded arguments into the JSON
// object Ollama expects. An empty string means no arguments.
func objectArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: arguments: %w", errBadInput, err)
		}
		if strings.TrimSpace(s) == "" {
			return json.RawMessage(`{}`), nil
		}
		raw = json.RawMessage(s)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: arguments must encode a JSON object", errBadInput)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: arguments: %w", errBadInput, err)
	}
	return buf.Bytes(), nil
}

type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// flattenContent returns a message's text and base64 images.
func flattenContent(raw json.RawMessage) (string, []string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, fmt.Errorf("%w: %w", errBadInput, err)
		}
		return s, nil, nil
	case '[':
	default:
		return "", nil, fmt.Errorf("%w: must be a string or an array of parts", errBadInput)
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fmt.Errorf("%w: parts: %w", errBadInput, err)
	}
	var texts, images []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			img, err := dataURLImage(p.ImageURL)
			if err != nil {
				return "", nil, err
			}
			images = append(images, img)
		default:
			return "", nil, fmt.Errorf("%w: part type %q is not supported", errBadInput, p.Type)
		}
	}
	return strings.Join(texts, "\n"), images, nil
}

// dataURLImage extracts the base64 payload of an image_url part, given as
// {"url": "data:image/png;base64,..."} or as the bare string.
func dataURLImage(raw json.RawMessage) (string, error) {
	var url string
	var obj struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.URL != "" {
		url = obj.URL
	} else if json.Unmarshal(raw, &url) != nil {
		return "", fmt.Errorf("%w: image_url must be an object with url", errBadInput)
	}
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return "", fmt.Errorf("%w: image_url must be a base64 data URL", errBadInput)
	}
	_, payload, ok := strings.Cut(rest, ";base64,")
	if !ok || payload == "" {
		return "", fmt.Errorf("%w: image_url must be a base64 data URL", errBadInput)
	}
	return payload, nil
}

func toolChoiceNone(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "none"
}

// options maps OpenAI sampling parameters onto Ollama options, over the
// configured defaults.
func (s *sampling) options(cfg *config) (map[string]any, error) {
	opts := cfg.defaultOptions()
	if s.Temperature != nil {
		opts["temperature"] = *s.Temperature
	}
	if s.TopP != nil {
		opts["top_p"] = *s.TopP
	}
	if s.Seed != nil {
		opts["seed"] = *s.Seed
	}
	if s.PresencePenalty != nil {
		opts["presence_penalty"] = *s.PresencePenalty
	}
	if s.FrequencyPenalty != nil {
		opts["frequency_penalty"] = *s.FrequencyPenalty
	}
	// max_completion_tokens supersedes the deprecated max_tokens.
	if s.MaxCompletionTokens != nil {
		opts["num_predict"] = *s.MaxCompletionTokens
	} else if s.MaxTokens != nil {
		opts["num_predict"] = *s.MaxTokens
	}
	stop, err := stopList(s.Stop)
	if err != nil {
		return nil, err
	}
	if stop != nil {
		opts["stop"] = stop
	}
	if len(opts) == 0 {
		return nil, nil
	}
	return opts, nil
}

// stopList accepts OpenAI's stop: a string, an array of strings, or null.
func stopList(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("%w: stop must be a string or an array of strings", errBadInput)
	}
	return many, nil
}

func decodeInput(input []byte, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		return fmt.Errorf("%w: empty input", errBadInput)
	}
	if err := json.Unmarshal(input, v); err != nil {
		return fmt.Errorf("%w: %w", errBadInput, err)
	}
	return nil
}
