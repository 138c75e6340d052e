package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The normalizer as it was when it decoded the body with encoding/json into
// the structs below, kept as the model FuzzNormalizeMatchesModel holds the
// scanning normalizer to. It differs on purpose where encoding/json matches
// a key that is not exactly the field's name (case folding) or merges
// duplicate keys: the scanning one reads exactly the members ParseChat
// validated. It also rounded seeds through a float64.

type chatDoc struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCallID string          `json:"tool_call_id"`
		// An assistant turn's earlier reasoning, under either name.
		Reasoning        string `json:"reasoning"`
		ReasoningContent string `json:"reasoning_content"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      bool            `json:"strict"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ResponseFormat    *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Stream bool `json:"stream"`
	samplingDoc
}

type samplingDoc struct {
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *float64        `json:"top_k"`
	MaxTokens           *float64        `json:"max_tokens"`
	MaxCompletionTokens *float64        `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *float64        `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
}

func modelNormalizeChat(body []byte) (*iop.RunInput, *Error) {
	var doc chatDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, InvalidRequest("The request body does not have the shape of a chat completions request.", "")
	}
	in := &iop.RunInput{ParallelToolCalls: doc.ParallelToolCalls}
	in.Messages = make([]*iop.ChatMessage, 0, len(doc.Messages))
	for i, m := range doc.Messages {
		role, ok := roleOf[m.Role]
		if !ok {
			return nil, invalidValue(fmt.Sprintf("messages[%d].role", i), "unsupported role.")
		}
		cm := &iop.ChatMessage{Role: role, Name: m.Name, ToolCallId: m.ToolCallID}
		parts, e := modelNormalizeContent(m.Content, fmt.Sprintf("messages[%d].content", i))
		if e != nil {
			return nil, e
		}
		cm.Content = parts
		// Carried on assistant messages only: "reasoning" when it holds
		// text, else "reasoning_content".
		if role == iop.ChatRole_CHAT_ROLE_ASSISTANT {
			cm.Reasoning = m.Reasoning
			if cm.Reasoning == "" {
				cm.Reasoning = m.ReasoningContent
			}
		}
		for _, c := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, &iop.ToolCall{Id: c.ID, Name: c.Function.Name, Arguments: argumentsText(c.Function.Arguments)})
		}
		in.Messages = append(in.Messages, cm)
	}
	for i, t := range doc.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, invalidValue(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("tool type %s is not supported by this model's provider; only function tools are.", quoteValue(t.Type)))
		}
		td := &iop.ToolDefinition{Name: t.Function.Name, Description: t.Function.Description, Strict: t.Function.Strict}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			td.Parameters = p
		}
		in.Tools = append(in.Tools, td)
	}
	tc, e := modelNormalizeToolChoice(doc.ToolChoice)
	if e != nil {
		return nil, e
	}
	in.ToolChoice = tc
	if rf := doc.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			in.ResponseFormat = &iop.ResponseFormat{Type: iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT}
		case "json_schema":
			f := &iop.ResponseFormat{Type: iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA}
			if js := rf.JSONSchema; js != nil {
				f.SchemaName, f.Strict = js.Name, js.Strict
				if s := bytes.TrimSpace(js.Schema); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
					f.Schema = s
				}
			}
			in.ResponseFormat = f
		default:
			return nil, invalidValue("response_format.type", fmt.Sprintf("expected 'text', 'json_object' or 'json_schema', but got %s.", quoteValue(rf.Type)))
		}
	}
	in.IncludeUsage = doc.Stream && doc.StreamOptions != nil && doc.StreamOptions.IncludeUsage
	s, e := doc.samplingDoc.normalize()
	if e != nil {
		return nil, e
	}
	in.Sampling = s
	if in.Extra, e = modelExtraMembers(body); e != nil {
		return nil, e
	}
	return in, nil
}

// normalizeContent converts a message's content: a string, null, or an
// array of text and image_url parts.
func modelNormalizeContent(raw json.RawMessage, param string) ([]*iop.ContentPart, *Error) {
	if isNull(raw) || len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if s, ok := asString(raw); ok {
		return []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: s}}}, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL *struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, typeError(param, "a string or an array of content parts", raw)
	}
	out := make([]*iop.ContentPart, 0, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, &iop.ContentPart{Part: &iop.ContentPart_Text{Text: p.Text}})
		case "refusal":
			out = append(out, &iop.ContentPart{Part: &iop.ContentPart_Text{Text: p.Refusal}})
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, missingParam(fmt.Sprintf("%s[%d].image_url.url", param, j))
			}
			out = append(out, &iop.ContentPart{Part: &iop.ContentPart_Image{Image: &iop.ImagePart{Url: p.ImageURL.URL, Detail: p.ImageURL.Detail}}})
		default:
			return nil, invalidValue(fmt.Sprintf("%s[%d].type", param, j),
				fmt.Sprintf("content part type %s is not supported by this model's provider; text, refusal and image_url are.", quoteValue(p.Type)))
		}
	}
	return out, nil
}

func modelNormalizeToolChoice(raw json.RawMessage) (*iop.ToolChoice, *Error) {
	if isNull(raw) || len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if s, ok := asString(raw); ok {
		switch s {
		case "auto":
			return &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO}, nil
		case "none":
			return &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}, nil
		case "required":
			return &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}, nil
		}
		return nil, invalidValue("tool_choice", fmt.Sprintf("expected 'none', 'auto' or 'required', but got %s.", quoteValue(s)))
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function.Name == "" {
		return nil, invalidValue("tool_choice", "expected a string or {\"type\":\"function\",\"function\":{\"name\":…}}.")
	}
	return &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: obj.Function.Name}, nil
}

// normalize converts the sampling parameters. Numbers the validation let
// through are finite; integers are checked to be whole here.
func (d *samplingDoc) normalize() (*iop.Sampling, *Error) {
	s := &iop.Sampling{Temperature: d.Temperature, TopP: d.TopP, PresencePenalty: d.PresencePenalty, FrequencyPenalty: d.FrequencyPenalty}
	if d.TopK != nil {
		k, e := modelWholeNumber(*d.TopK, "top_k", -1, math.MaxInt32)
		if e != nil {
			return nil, e
		}
		k32 := int32(k)
		s.TopK = &k32
	}
	switch {
	case d.MaxCompletionTokens != nil:
		n, e := modelWholeNumber(*d.MaxCompletionTokens, "max_completion_tokens", 0, MaxOutputTokens)
		if e != nil {
			return nil, e
		}
		s.MaxTokens = n
	case d.MaxTokens != nil:
		n, e := modelWholeNumber(*d.MaxTokens, "max_tokens", 0, MaxOutputTokens)
		if e != nil {
			return nil, e
		}
		s.MaxTokens = n
	}
	if d.Seed != nil {
		n, e := modelWholeNumber(*d.Seed, "seed", math.MinInt64, math.MaxInt64)
		if e != nil {
			return nil, e
		}
		s.Seed = &n
	}
	if !isNull(d.Stop) && len(bytes.TrimSpace(d.Stop)) > 0 {
		if one, ok := asString(d.Stop); ok {
			s.Stop = []string{one}
		} else if err := json.Unmarshal(d.Stop, &s.Stop); err != nil {
			return nil, typeError("stop", "a string or an array of strings", d.Stop)
		}
	}
	return s, nil
}

func modelWholeNumber(f float64, param string, lo, hi float64) (int64, *Error) {
	if f != math.Trunc(f) || f < lo || f > hi {
		return 0, invalidValue(param, fmt.Sprintf("expected an integer between %.0f and %.0f.", lo, hi))
	}
	return int64(f), nil
}

// extraMembers collects the top-level members no typed field carries, as
// one JSON object (nil when there are none).
func modelExtraMembers(body []byte) ([]byte, *Error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, InvalidRequest("The request body must be a JSON object.", "")
	}
	for k := range obj {
		if normalizedKeys[k] {
			delete(obj, k)
		}
	}
	if len(obj) == 0 {
		return nil, nil
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, InvalidRequest("The request body must be a JSON object.", "")
	}
	return out, nil
}

// modelNormalizeCompletion turns a validated completions body into the run
// input. The run path serves one prompt (several go through the tunnel):
// a list must hold exactly one string.
func modelNormalizeCompletion(body []byte) (*iop.RunInput, error) {
	var doc struct {
		Prompt json.RawMessage `json:"prompt"`
		Suffix string          `json:"suffix"`
		samplingDoc
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, InvalidRequest("The request body does not have the shape of a completions request.", "")
	}
	in := &iop.RunInput{Suffix: doc.Suffix}
	if s, ok := asString(doc.Prompt); ok {
		in.Prompt = s
	} else {
		var list []string
		if err := json.Unmarshal(doc.Prompt, &list); err != nil || len(list) != 1 {
			return nil, invalidValue("prompt", "this model's provider takes one prompt string per request.")
		}
		in.Prompt = list[0]
	}
	s, e := doc.samplingDoc.normalize()
	if e != nil {
		return nil, e
	}
	in.Sampling = s
	if in.Extra, e = modelExtraMembers(body); e != nil {
		return nil, e
	}
	return in, nil
}

// modelNormalizeEmbedding turns a validated embeddings body into the run input
// (strings only: token arrays need a provider reached through the tunnel).
func modelNormalizeEmbedding(body []byte) (*iop.RunInput, error) {
	var doc struct {
		Input      json.RawMessage `json:"input"`
		Dimensions *float64        `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, InvalidRequest("The request body does not have the shape of an embeddings request.", "")
	}
	in := &iop.RunInput{}
	if s, ok := asString(doc.Input); ok {
		in.EmbedInputs = []string{s}
	} else if err := json.Unmarshal(doc.Input, &in.EmbedInputs); err != nil {
		return nil, invalidValue("input", "this model's provider takes a string or an array of strings.")
	}
	if doc.Dimensions != nil {
		d, e := modelWholeNumber(*doc.Dimensions, "dimensions", 1, math.MaxInt32)
		if e != nil {
			return nil, e
		}
		in.Dimensions = &d
	}
	var e *Error
	if in.Extra, e = modelExtraMembers(body); e != nil {
		return nil, e
	}
	return in, nil
}
