package openaicompat

import (
	"encoding/json"
	"fmt"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// requestBody encodes the normalized run input as the OpenAI request body
// of op for target: the members of RunInput.extra first (the caller's
// vendor extensions, passed through), then every typed field over them.
// reasoning names the assistant-message member that carries a turn's
// earlier reasoning back (see historyReasoning); "" drops it.
func requestBody(in *iop.RunInput, op iop.RunOperation, target string, reasoning string) (map[string]json.RawMessage, error) {
	body := map[string]json.RawMessage{}
	if extra := in.GetExtra(); len(extra) > 0 {
		if err := json.Unmarshal(extra, &body); err != nil || body == nil {
			return nil, invalidInput("input: extra members must be a JSON object")
		}
	}
	if target != "" {
		body["model"] = mustJSON(target)
	}
	switch op {
	case adapter.OpChat:
		msgs := make([]wireMessage, 0, len(in.GetMessages()))
		for _, m := range in.GetMessages() {
			msgs = append(msgs, toWireMessage(m, reasoning))
		}
		body["messages"] = mustJSON(msgs)
		if len(in.GetTools()) > 0 {
			tools := make([]wireTool, 0, len(in.GetTools()))
			for _, t := range in.GetTools() {
				wt := wireTool{Type: "function"}
				wt.Function.Name, wt.Function.Description, wt.Function.Strict = t.GetName(), t.GetDescription(), t.GetStrict()
				if p := t.GetParameters(); len(p) > 0 && json.Valid(p) {
					wt.Function.Parameters = p
				}
				tools = append(tools, wt)
			}
			body["tools"] = mustJSON(tools)
		}
		if tc := toolChoiceJSON(in.GetToolChoice()); tc != nil {
			body["tool_choice"] = tc
		}
		if in != nil && in.ParallelToolCalls != nil {
			body["parallel_tool_calls"] = mustJSON(in.GetParallelToolCalls())
		}
		if rf := responseFormatJSON(in.GetResponseFormat()); rf != nil {
			body["response_format"] = rf
		}
		setSampling(body, in.GetSampling())
	case adapter.OpCompletion:
		body["prompt"] = mustJSON(in.GetPrompt())
		if s := in.GetSuffix(); s != "" {
			body["suffix"] = mustJSON(s)
		}
		setSampling(body, in.GetSampling())
	case adapter.OpEmbedding:
		if len(in.GetEmbedInputs()) == 0 {
			return nil, invalidInput("input: no texts to embed")
		}
		body["input"] = mustJSON(in.GetEmbedInputs())
		if in != nil && in.Dimensions != nil {
			body["dimensions"] = mustJSON(in.GetDimensions())
		}
	default:
		return nil, fmt.Errorf("openaicompat: %w: operation %s", adapter.ErrUnsupported, op)
	}
	return body, nil
}

// wireMessage is a chat message in OpenAI's shape.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // string, []wirePart or nil
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// An assistant turn's earlier reasoning, under the one member the
	// backend reads (historyReasoning); both empty otherwise.
	Reasoning        string `json:"reasoning,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// The members an assistant turn's earlier reasoning can go back in.
const (
	// reasoningMember is what vLLM reads (chat_utils'
	// _parse_chat_message_content takes "reasoning" on an assistant
	// message and hands it to the template as reasoning_content too).
	reasoningMember = "reasoning"
	// reasoningContentMember is what llama-server reads
	// (common_chat_msgs_parse_oaicompat), as DeepSeek's API names it.
	reasoningContentMember = "reasoning_content"
)

type wirePart struct {
	Type     string        `json:"type"`
	Text     *string       `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
}

type wireImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      bool            `json:"strict,omitempty"`
	} `json:"function"`
}

// toWireMessage encodes one message; content that is one text part goes as
// a plain string (what every OpenAI-compatible server accepts). An
// assistant turn's reasoning goes under the member reasoning names, when
// it has any.
func toWireMessage(m *iop.ChatMessage, reasoning string) wireMessage {
	wm := wireMessage{Role: adapter.RoleName(m.GetRole()), Name: m.GetName(), ToolCallID: m.GetToolCallId()}
	if m.GetRole() == iop.ChatRole_CHAT_ROLE_ASSISTANT {
		switch reasoning {
		case reasoningMember:
			wm.Reasoning = m.GetReasoning()
		case reasoningContentMember:
			wm.ReasoningContent = m.GetReasoning()
		}
	}
	parts := m.GetContent()
	switch {
	case len(parts) == 1 && parts[0].GetImage() == nil:
		wm.Content = parts[0].GetText()
	case len(parts) > 0:
		wps := make([]wirePart, 0, len(parts))
		for _, p := range parts {
			if img := p.GetImage(); img != nil {
				wps = append(wps, wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: img.GetUrl(), Detail: img.GetDetail()}})
				continue
			}
			text := p.GetText()
			wps = append(wps, wirePart{Type: "text", Text: &text})
		}
		wm.Content = wps
	}
	for _, c := range m.GetToolCalls() {
		wc := wireToolCall{ID: c.GetId(), Type: "function"}
		wc.Function.Name, wc.Function.Arguments = c.GetName(), c.GetArguments()
		wm.ToolCalls = append(wm.ToolCalls, wc)
	}
	return wm
}

func toolChoiceJSON(tc *iop.ToolChoice) json.RawMessage {
	switch tc.GetMode() {
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:
		return json.RawMessage(`"auto"`)
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		return json.RawMessage(`"none"`)
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		return json.RawMessage(`"required"`)
	case iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": tc.GetFunctionName()}})
	}
	return nil
}

func responseFormatJSON(rf *iop.ResponseFormat) json.RawMessage {
	switch rf.GetType() {
	case iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_TEXT:
		return json.RawMessage(`{"type":"text"}`)
	case iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT:
		return json.RawMessage(`{"type":"json_object"}`)
	case iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
		js := map[string]any{"name": rf.GetSchemaName()}
		if s := rf.GetSchema(); len(s) > 0 && json.Valid(s) {
			js["schema"] = json.RawMessage(s)
		}
		if rf.GetStrict() {
			js["strict"] = true
		}
		return mustJSON(map[string]any{"type": "json_schema", "json_schema": js})
	}
	return nil
}

// setSampling writes the set sampling parameters. top_k goes as the vLLM
// extension of that name.
func setSampling(body map[string]json.RawMessage, s *iop.Sampling) {
	if s == nil {
		return
	}
	if s.Temperature != nil {
		body["temperature"] = mustJSON(s.GetTemperature())
	}
	if s.TopP != nil {
		body["top_p"] = mustJSON(s.GetTopP())
	}
	if s.TopK != nil {
		body["top_k"] = mustJSON(s.GetTopK())
	}
	if n := s.GetMaxTokens(); n > 0 {
		body["max_tokens"] = mustJSON(n)
	}
	if len(s.GetStop()) > 0 {
		body["stop"] = mustJSON(s.GetStop())
	}
	if s.Seed != nil {
		body["seed"] = mustJSON(s.GetSeed())
	}
	if s.PresencePenalty != nil {
		body["presence_penalty"] = mustJSON(s.GetPresencePenalty())
	}
	if s.FrequencyPenalty != nil {
		body["frequency_penalty"] = mustJSON(s.GetFrequencyPenalty())
	}
}
