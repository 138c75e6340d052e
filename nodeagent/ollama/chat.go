package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// errBadInput marks a run input the adapter cannot translate; Run turns it
// into an invalid_request adapter.Error.
var errBadInput = errors.New("bad input")

// ollamaChat is the body of POST /api/chat.
type ollamaChat struct {
	Model     string            `json:"model"`
	Messages  []ollamaMessage   `json:"messages"`
	Stream    bool              `json:"stream"`
	Format    json.RawMessage   `json:"format,omitempty"`
	Tools     []json.RawMessage `json:"tools,omitempty"`
	Options   map[string]any    `json:"options,omitempty"`
	KeepAlive json.RawMessage   `json:"keep_alive,omitempty"`
	// Think is false, "low", "medium", "high" or "max" when the caller gave
	// a reasoning effort; absent otherwise, so a model that can think does.
	Think json.RawMessage `json:"think,omitempty"`
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Thinking is an assistant turn's earlier reasoning, sent back: the
	// model's template decides whether it is rendered (Qwen 3 keeps it for
	// the turns after the last user message, gpt-oss for tool calls).
	Thinking  string           `json:"thinking,omitempty"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
	// ToolCallID pairs a result with its call by id, as renderers of
	// templates that number calls do (Cohere's, Gemma 4's); servers from
	// before the field ignore it.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

type ollamaToolCall struct {
	ID       string         `json:"id,omitempty"`
	Function ollamaFunction `json:"function"`
}

type ollamaFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// buildChat translates the normalized chat input into Ollama's /api/chat
// body. Notes on the mapping:
//   - a message's text is adapter.MessageText; images must be base64 data
//     URLs and become the message's images (Ollama cannot fetch remote URLs
//     through this adapter, so those are rejected);
//   - role developer is sent as system (Ollama templates know no developer
//     role);
//   - an assistant message's reasoning (its earlier thinking, sent back)
//     becomes its thinking, as Ollama's own OpenAI layer maps reasoning;
//   - assistant tool calls get object arguments and keep their ids; a tool
//     message keeps its tool_call_id and gets tool_name from its name or
//     from the call its tool_call_id answers;
//   - tool_choice none drops the tools, and one naming a function offers
//     that tool alone (Ollama cannot force a call, but the model can then
//     call no other); required cannot be expressed: the tools go as given,
//     nothing is added to the prompt the model's template renders, and
//     the request is not refused (Ollama's own OpenAI layer ignores
//     tool_choice too, and clients that set it work there). The text form
//     (texttools.go) states both in its instruction;
//   - response_format json_object -> format "json", json_schema -> format
//     set to the schema;
//   - reasoning_effort (or reasoning.effort) from the extra members -> think,
//     as Ollama's own OpenAI layer maps it (thinkFromReasoningEffort).
func buildChat(in *iop.RunInput, model string, cfg *config) (*ollamaChat, error) {
	out := &ollamaChat{Model: model, Stream: true, KeepAlive: cfg.keepAlive}
	var err error
	if out.Think, err = thinkOf(in); err != nil {
		return nil, err
	}
	if out.Messages, err = convertMessages(in.GetMessages()); err != nil {
		return nil, err
	}
	out.Options = options(in.GetSampling(), cfg)
	if adapter.ToolsOffered(in) {
		for _, t := range offeredTools(in) {
			tool, err := json.Marshal(ollamaTool{Type: "function", Function: ollamaToolFunction{
				Name: t.GetName(), Description: t.GetDescription(), Parameters: t.GetParameters(),
			}})
			if err != nil {
				return nil, fmt.Errorf("%w: tool %q: %w", errBadInput, t.GetName(), err)
			}
			out.Tools = append(out.Tools, tool)
		}
	}
	switch rf := in.GetResponseFormat(); rf.GetType() {
	case iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT:
		out.Format = json.RawMessage(`"json"`)
	case iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
		out.Format = json.RawMessage(`"json"`)
		if len(rf.GetSchema()) > 0 {
			out.Format = rf.GetSchema()
		}
	}
	return out, nil
}

// offeredTools is the tools the model may call: the one tool_choice names
// when it is among them, else all.
func offeredTools(in *iop.RunInput) []*iop.ToolDefinition {
	tools := in.GetTools()
	if tc := in.GetToolChoice(); tc.GetMode() == iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION {
		for i, t := range tools {
			if t.GetName() == tc.GetFunctionName() {
				return tools[i : i+1]
			}
		}
	}
	return tools
}

// ollamaTool is a tool as /api/chat takes it (OpenAI's function shape).
type ollamaTool struct {
	Type     string             `json:"type"`
	Function ollamaToolFunction `json:"function"`
}

type ollamaToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // omitted when the caller gave none
}

func convertMessages(msgs []*iop.ChatMessage) ([]ollamaMessage, error) {
	out := make([]ollamaMessage, 0, len(msgs))
	for i, m := range msgs {
		om := ollamaMessage{Content: adapter.MessageText(m)}
		for j, img := range adapter.MessageImages(m) {
			payload, err := dataURLImage(img.GetUrl())
			if err != nil {
				return nil, fmt.Errorf("messages[%d] image %d: %w", i, j, err)
			}
			om.Images = append(om.Images, payload)
		}
		switch m.GetRole() {
		case iop.ChatRole_CHAT_ROLE_SYSTEM, iop.ChatRole_CHAT_ROLE_DEVELOPER:
			om.Role = "system"
		case iop.ChatRole_CHAT_ROLE_USER:
			om.Role = "user"
		case iop.ChatRole_CHAT_ROLE_ASSISTANT:
			om.Role = "assistant"
			om.Thinking = m.GetReasoning()
			for j, tc := range m.GetToolCalls() {
				args, err := objectArguments(tc.GetArguments())
				if err != nil {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d]: %w", i, j, err)
				}
				om.ToolCalls = append(om.ToolCalls, ollamaToolCall{
					ID:       tc.GetId(),
					Function: ollamaFunction{Name: tc.GetName(), Arguments: args},
				})
			}
		case iop.ChatRole_CHAT_ROLE_TOOL:
			om.Role = "tool"
			om.ToolName = m.GetName()
			om.ToolCallID = m.GetToolCallId()
			if om.ToolName == "" && m.GetToolCallId() != "" {
				om.ToolName = toolNameFor(msgs[:i], m.GetToolCallId())
			}
		default:
			return nil, fmt.Errorf("%w: messages[%d]: unknown role %s", errBadInput, i, m.GetRole())
		}
		out = append(out, om)
	}
	return out, nil
}

// toolNameFor finds the function name of the call with id, searching the
// newest messages first so a reused id resolves to its latest call.
func toolNameFor(prior []*iop.ChatMessage, id string) string {
	for i := len(prior) - 1; i >= 0; i-- {
		for _, tc := range prior[i].GetToolCalls() {
			if tc.GetId() == id {
				return tc.GetName()
			}
		}
	}
	return ""
}

// objectArguments turns a call's JSON-text arguments into the JSON object
// Ollama expects. Empty text means no arguments. Anything but an object
// (an array, a number, a string, true or false, null, text that is no
// JSON) is refused: Ollama types /api/chat's tool_calls[].function.arguments
// as an object (api.ToolCallFunctionArguments, an ordered map), and its
// own OpenAI layer refuses such arguments too ("invalid tool call
// arguments", openai.FromCompletionToolCall).
func objectArguments(text string) (json.RawMessage, error) {
	raw := bytes.TrimSpace([]byte(text))
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
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

// checkHistoryArguments refuses msgs when an assistant turn's tool call has
// arguments the native form refuses (objectArguments), so that the text
// form, which writes them into the prompt, shows the model only what
// Ollama itself would take; the error names the call as convertMessages
// does.
func checkHistoryArguments(msgs []*iop.ChatMessage) error {
	for i, m := range msgs {
		if m.GetRole() != iop.ChatRole_CHAT_ROLE_ASSISTANT {
			continue
		}
		for j, tc := range m.GetToolCalls() {
			if _, err := objectArguments(tc.GetArguments()); err != nil {
				return fmt.Errorf("messages[%d].tool_calls[%d]: %w", i, j, err)
			}
		}
	}
	return nil
}

// dataURLImage extracts the base64 payload of an image data URL.
func dataURLImage(url string) (string, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return "", fmt.Errorf("%w: images must be base64 data URLs", errBadInput)
	}
	_, payload, ok := strings.Cut(rest, ";base64,")
	if !ok || payload == "" {
		return "", fmt.Errorf("%w: images must be base64 data URLs", errBadInput)
	}
	return payload, nil
}

// options maps the sampling parameters onto Ollama options, over the
// configured defaults; nil when there are none.
func options(s *iop.Sampling, cfg *config) map[string]any {
	opts := cfg.defaultOptions()
	if s == nil { // a request without sampling: the defaults alone
		s = &iop.Sampling{}
	}
	if s.Temperature != nil {
		opts["temperature"] = s.GetTemperature()
	}
	if s.TopP != nil {
		opts["top_p"] = s.GetTopP()
	}
	if s.TopK != nil {
		opts["top_k"] = s.GetTopK()
	}
	if s.Seed != nil {
		opts["seed"] = s.GetSeed()
	}
	if s.PresencePenalty != nil {
		opts["presence_penalty"] = s.GetPresencePenalty()
	}
	if s.FrequencyPenalty != nil {
		opts["frequency_penalty"] = s.GetFrequencyPenalty()
	}
	if n := s.GetMaxTokens(); n > 0 {
		opts["num_predict"] = n
	}
	if stop := s.GetStop(); len(stop) > 0 {
		opts["stop"] = stop
	}
	if len(opts) == 0 {
		return nil
	}
	return opts
}
