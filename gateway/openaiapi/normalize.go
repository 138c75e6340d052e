package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The normalized run input (iop.RunInput) is produced here, once, from a
// body the Parse* functions already validated: adapters on the node consume
// it and never the caller's JSON. Whatever the typed fields do not carry
// travels in RunInput.extra for OpenAI-shaped backends.
//
// The body is read with the same scanning helpers as validation, its top
// level into a member map (topMembers, which also keeps the members no
// typed field carries), never with encoding/json into structs:
// encoding/json matches keys case-insensitively ("Messages", "ſtream") and
// merges duplicate objects, so it could carry members validation never
// looked at, and it decoded a long prompt three times at its speed. Every
// string and byte slice in the result is a copy: the input outlives no
// reference into the body.

// normalizedKeys are the top-level members the typed input carries (or
// that only the edge reads); every other member goes to RunInput.extra.
var normalizedKeys = map[string]bool{
	"model": true, "messages": true, "tools": true, "tool_choice": true,
	"parallel_tool_calls": true, "temperature": true, "top_p": true, "top_k": true,
	"max_tokens": true, "max_completion_tokens": true, "stop": true, "seed": true,
	"presence_penalty": true, "frequency_penalty": true, "response_format": true,
	"stream": true, "n": true, "prompt": true, "input": true,
	"suffix": true, "dimensions": true,
}

var roleOf = map[string]iop.ChatRole{
	"system": iop.ChatRole_CHAT_ROLE_SYSTEM, "developer": iop.ChatRole_CHAT_ROLE_DEVELOPER,
	"user": iop.ChatRole_CHAT_ROLE_USER, "assistant": iop.ChatRole_CHAT_ROLE_ASSISTANT,
	"tool": iop.ChatRole_CHAT_ROLE_TOOL,
}

// NormalizeChat turns a validated chat completions body into the run input.
// It fails with a 400 *Error for content the run path cannot carry (audio
// or file parts, non-function tools) and for members of the wrong type.
func NormalizeChat(body []byte) (*iop.RunInput, error) { return normalizeBody(body, chatInput) }

// RunInput is NormalizeChat of the validated request, without validating
// its body again: the top level is scanned from Raw (topMembers), which
// costs one pass over the body and spares every request the tunnel serves
// a map it would never read.
func (r *ChatRequest) RunInput() (*iop.RunInput, error) { return result(chatInput(topMembers(r.Raw))) }

// normalizeBody is input of body's top-level members, once decodeTopLevel
// has checked them as the Parse* functions do.
func normalizeBody(body []byte, input func(object) (*iop.RunInput, *Error)) (*iop.RunInput, error) {
	obj, e := decodeTopLevel(body, nil)
	if e != nil {
		return nil, e
	}
	return result(input(obj))
}

// result returns e as an error interface only when it is not nil (never
// a typed nil inside the interface).
func result(in *iop.RunInput, e *Error) (*iop.RunInput, error) {
	if e != nil {
		return nil, e
	}
	return in, nil
}

// chatInput normalizes the top-level members of a chat body.
func chatInput(obj object) (*iop.RunInput, *Error) {
	in := &iop.RunInput{}
	msgs, _, e := optArray(obj["messages"], "messages")
	if e != nil {
		return nil, e
	}
	in.Messages = make([]*iop.ChatMessage, 0, len(msgs))
	for i, raw := range msgs {
		cm, e := normalizeMessage(raw, pname{base: "messages", i: i, j: -1})
		if e != nil {
			return nil, e
		}
		in.Messages = append(in.Messages, cm)
	}
	if in.Tools, e = normalizeTools(obj); e != nil {
		return nil, e
	}
	if in.ToolChoice, e = normalizeToolChoice(obj["tool_choice"]); e != nil {
		return nil, e
	}
	if in.ParallelToolCalls, e = optBoolPtr(obj, "parallel_tool_calls"); e != nil {
		return nil, e
	}
	if in.ResponseFormat, e = normalizeResponseFormat(obj); e != nil {
		return nil, e
	}
	stream, e := optBool(obj["stream"], "stream")
	if e != nil {
		return nil, e
	}
	opts, e := optObject(obj["stream_options"], "stream_options")
	if e != nil {
		return nil, e
	}
	includeUsage, e := optBool(opts["include_usage"], "stream_options.include_usage")
	if e != nil {
		return nil, e
	}
	in.IncludeUsage = stream && includeUsage
	if in.Sampling, e = normalizeSampling(obj); e != nil {
		return nil, e
	}
	if in.Extra, e = extraMembers(obj); e != nil {
		return nil, e
	}
	return in, nil
}

// normalizeMessage converts one element of messages. A null element reads
// as a message without members (refused for its missing role).
func normalizeMessage(raw json.RawMessage, p pname) (*iop.ChatMessage, *Error) {
	var m messageFields
	if e := fieldsOrNull(raw, messageMembers, m[:], p); e != nil {
		return nil, e
	}
	role, _, e := optStringAt(m[msgRole], p.dot(".role"))
	if e != nil {
		return nil, e
	}
	r, ok := roleOf[role]
	if !ok {
		return nil, invalidValue(p.dot(".role").String(), "unsupported role.")
	}
	cm := &iop.ChatMessage{Role: r}
	if cm.Name, _, e = optStringAt(m[msgName], p.dot(".name")); e != nil {
		return nil, e
	}
	if cm.ToolCallId, _, e = optStringAt(m[msgToolCallID], p.dot(".tool_call_id")); e != nil {
		return nil, e
	}
	cp := p
	cp.mid = ".content"
	if cm.Content, e = normalizeContent(m[msgContent], cp); e != nil {
		return nil, e
	}
	// Earlier reasoning is an assistant's: on another role it is checked
	// (validation did) but not carried, as vLLM reads it on assistant
	// messages only and no template renders it elsewhere.
	if cm.Reasoning, e = messageReasoning(&m, p, r == iop.ChatRole_CHAT_ROLE_ASSISTANT); e != nil {
		return nil, e
	}
	calls, _, e := optArrayAt(m[msgToolCalls], p.dot(".tool_calls"))
	if e != nil {
		return nil, e
	}
	for j, raw := range calls {
		tp := p
		tp.mid, tp.j = ".tool_calls", j
		c, e := normalizeToolCall(raw, tp)
		if e != nil {
			return nil, e
		}
		cm.ToolCalls = append(cm.ToolCalls, c)
	}
	return cm, nil
}

// normalizeToolCall converts one of an assistant message's earlier calls
// (p names it); a null element is a call without members.
func normalizeToolCall(raw json.RawMessage, p pname) (*iop.ToolCall, *Error) {
	c, e := objectOrNull(raw, p)
	if e != nil {
		return nil, e
	}
	tc := &iop.ToolCall{}
	if tc.Id, _, e = optStringAt(c["id"], p.dot(".id")); e != nil {
		return nil, e
	}
	fn, e := optObjectAt(c["function"], p.dot(".function"))
	if e != nil {
		return nil, e
	}
	if tc.Name, _, e = optStringAt(fn["name"], p.dot(".function.name")); e != nil {
		return nil, e
	}
	tc.Arguments = argumentsText(fn["arguments"])
	return tc, nil
}

// argumentsText keeps a tool call's arguments as the JSON text they are:
// OpenAI sends a JSON string holding JSON; an object sent instead is kept
// as its JSON text.
func argumentsText(raw json.RawMessage) string {
	if s, ok := asString(raw); ok {
		return s
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	return string(raw)
}

// normalizeContent converts a message's content: absent, null, a string,
// or an array of text, refusal and image_url parts. p names the content.
func normalizeContent(raw json.RawMessage, p pname) ([]*iop.ContentPart, *Error) {
	if isNull(raw) || len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if s, ok := asString(raw); ok {
		return []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: s}}}, nil
	}
	parts, ok := asArray(raw)
	if !ok {
		return nil, typeError(p.String(), "a string or an array of content parts", raw)
	}
	out := make([]*iop.ContentPart, 0, len(parts))
	var part [len(partNames)]json.RawMessage // by contentPartMembers' order
	for j, raw := range parts {
		pp := p
		pp.j = j
		if e := fieldsOrNull(raw, contentPartMembers, part[:], pp); e != nil {
			return nil, e
		}
		// Every member is read whatever the type, so that a malformed
		// one is refused the same way on every part.
		typ, _, e := optStringAt(part[partType], pp.dot(".type"))
		if e != nil {
			return nil, e
		}
		text, _, e := optStringAt(part[partText], pp.dot(".text"))
		if e != nil {
			return nil, e
		}
		refusal, _, e := optStringAt(part[partRefusal], pp.dot(".refusal"))
		if e != nil {
			return nil, e
		}
		img, e := optMembersAt(part[partImageURL], pp.dot(".image_url"), nil)
		if e != nil {
			return nil, e
		}
		url, _, e := optStringAt(img["url"], pp.dot(".image_url.url"))
		if e != nil {
			return nil, e
		}
		detail, _, e := optStringAt(img["detail"], pp.dot(".image_url.detail"))
		if e != nil {
			return nil, e
		}
		switch typ {
		case "text":
			out = append(out, &iop.ContentPart{Part: &iop.ContentPart_Text{Text: text}})
		case "refusal":
			// An assistant's earlier refusal is text the model said, as
			// vLLM reads it; the run input has no part of its own for it.
			out = append(out, &iop.ContentPart{Part: &iop.ContentPart_Text{Text: refusal}})
		case "image_url":
			if url == "" {
				return nil, missingParam(pp.dot(".image_url.url").String())
			}
			out = append(out, &iop.ContentPart{Part: &iop.ContentPart_Image{Image: &iop.ImagePart{Url: url, Detail: detail}}})
		default:
			return nil, invalidValue(pp.dot(".type").String(),
				fmt.Sprintf("content part type %s is not supported by this model's provider; text, refusal and image_url are.", quoteValue(typ)))
		}
	}
	return out, nil
}

// normalizeTools converts tools; only function tools can be carried.
func normalizeTools(obj object) ([]*iop.ToolDefinition, *Error) {
	tools, _, e := optArray(obj["tools"], "tools")
	if e != nil {
		return nil, e
	}
	var out []*iop.ToolDefinition
	for i, raw := range tools {
		p := pname{base: "tools", i: i, j: -1}
		t, e := objectOrNull(raw, p)
		if e != nil {
			return nil, e
		}
		typ, _, e := optStringAt(t["type"], p.dot(".type"))
		if e != nil {
			return nil, e
		}
		if typ != "" && typ != "function" {
			return nil, invalidValue(p.dot(".type").String(), fmt.Sprintf("tool type %s is not supported by this model's provider; only function tools are.", quoteValue(typ)))
		}
		fn, e := optObjectAt(t["function"], p.dot(".function"))
		if e != nil {
			return nil, e
		}
		td := &iop.ToolDefinition{}
		if td.Name, _, e = optStringAt(fn["name"], p.dot(".function.name")); e != nil {
			return nil, e
		}
		if td.Description, _, e = optStringAt(fn["description"], p.dot(".function.description")); e != nil {
			return nil, e
		}
		if td.Strict, e = optBool(fn["strict"], p.dot(".function.strict").String()); e != nil {
			return nil, e
		}
		td.Parameters = jsonValue(fn["parameters"])
		out = append(out, td)
	}
	return out, nil
}

// normalizeToolChoice converts tool_choice: absent, null, a mode string,
// or {"type":"function","function":{"name":…}}.
func normalizeToolChoice(raw json.RawMessage) (*iop.ToolChoice, *Error) {
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
	refuse := invalidValue("tool_choice", "expected a string or {\"type\":\"function\",\"function\":{\"name\":…}}.")
	choice, ok := asObject(raw)
	if !ok {
		return nil, refuse
	}
	typ, _, e := optString(choice["type"], "tool_choice.type")
	if e != nil || typ != "function" {
		return nil, refuse
	}
	fn, e := optObject(choice["function"], "tool_choice.function")
	if e != nil {
		return nil, refuse
	}
	name, _, e := optString(fn["name"], "tool_choice.function.name")
	if e != nil || name == "" {
		return nil, refuse
	}
	return &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: name}, nil
}

// normalizeResponseFormat converts response_format (nil when absent, null
// or "text").
func normalizeResponseFormat(obj object) (*iop.ResponseFormat, *Error) {
	rf, e := optObject(obj["response_format"], "response_format")
	if e != nil || rf == nil {
		return nil, e
	}
	typ, _, e := optString(rf["type"], "response_format.type")
	if e != nil {
		return nil, e
	}
	js, e := optObject(rf["json_schema"], "response_format.json_schema")
	if e != nil {
		return nil, e
	}
	name, _, e := optString(js["name"], "response_format.json_schema.name")
	if e != nil {
		return nil, e
	}
	strict, e := optBool(js["strict"], "response_format.json_schema.strict")
	if e != nil {
		return nil, e
	}
	switch typ {
	case "", "text":
		return nil, nil
	case "json_object":
		return &iop.ResponseFormat{Type: iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT}, nil
	case "json_schema":
		return &iop.ResponseFormat{Type: iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
			SchemaName: name, Strict: strict, Schema: jsonValue(js["schema"])}, nil
	}
	return nil, invalidValue("response_format.type", fmt.Sprintf("expected 'text', 'json_object' or 'json_schema', but got %s.", quoteValue(typ)))
}

// normalizeSampling converts the sampling parameters. Integers are exact
// (a seed above 2^53 is not rounded through a float64); written as floats
// (1e3, 7.0) they must be whole.
func normalizeSampling(obj object) (*iop.Sampling, *Error) {
	s := &iop.Sampling{}
	var e *Error
	for _, f := range []struct {
		key string
		dst **float64
	}{
		{"temperature", &s.Temperature}, {"top_p", &s.TopP},
		{"presence_penalty", &s.PresencePenalty}, {"frequency_penalty", &s.FrequencyPenalty},
	} {
		if *f.dst, e = optFloatPtr(obj, f.key); e != nil {
			return nil, e
		}
	}
	if k, has, e := optInt(obj["top_k"], "top_k", -1, math.MaxInt32); e != nil {
		return nil, e
	} else if has {
		k32 := int32(k)
		s.TopK = &k32
	}
	// max_completion_tokens replaces the deprecated max_tokens when both
	// are sent, as OpenAI reads them.
	key := "max_tokens"
	if raw, ok := obj["max_completion_tokens"]; ok && !isNull(raw) {
		key = "max_completion_tokens"
	}
	if s.MaxTokens, _, e = optInt(obj[key], key, 0, MaxOutputTokens); e != nil {
		return nil, e
	}
	if n, has, e := optInt(obj["seed"], "seed", math.MinInt64, math.MaxInt64); e != nil {
		return nil, e
	} else if has {
		s.Seed = &n
	}
	if s.Stop, e = stopList(obj["stop"]); e != nil {
		return nil, e
	}
	return s, nil
}

// stopList converts stop: absent, null, a string or an array of strings.
func stopList(raw json.RawMessage) ([]string, *Error) {
	if isNull(raw) || len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	return stringOrList(raw, "stop")
}

// stringOrList converts a string or an array of strings; param names it
// in the error.
func stringOrList(raw json.RawMessage, param string) ([]string, *Error) {
	if one, ok := asString(raw); ok {
		return []string{one}, nil
	}
	return stringList(raw, param, "a string or an array of strings")
}

// stringList converts an array of strings (a null element reads as "").
// param and expected name it in the error.
func stringList(raw json.RawMessage, param, expected string) ([]string, *Error) {
	arr, ok := asArray(raw)
	if !ok {
		return nil, typeError(param, expected, raw)
	}
	out := make([]string, len(arr))
	for i, el := range arr {
		if isNull(el) {
			continue
		}
		s, ok := asString(el)
		if !ok {
			return nil, typeError(fmt.Sprintf("%s[%d]", param, i), "a string", el)
		}
		out[i] = s
	}
	return out, nil
}

// fieldsOrNull is objectOrNull for an object read only through s's names,
// into dst (fieldsOf); a null leaves dst all nil. What it would flag is
// not refused here: the run input is built from a validated body, whose
// levels validation already checked.
func fieldsOrNull(raw json.RawMessage, s *memberSet, dst []json.RawMessage, p pname) *Error {
	clear(dst)
	if isNull(raw) {
		return nil
	}
	if _, ok := fieldsOf(raw, s, dst); !ok {
		return typeError(p.String(), "an object", raw)
	}
	return nil
}

// objectOrNull is raw as an object, nil for null; p names it in the error.
func objectOrNull(raw json.RawMessage, p pname) (object, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	o, ok := asObject(raw)
	if !ok {
		return nil, typeError(p.String(), "an object", raw)
	}
	return o, nil
}

// optBoolPtr is optBool keeping absence (nil) apart from false.
func optBoolPtr(obj object, key string) (*bool, *Error) {
	if raw, ok := obj[key]; !ok || isNull(raw) {
		return nil, nil
	}
	v, e := optBool(obj[key], key)
	if e != nil {
		return nil, e
	}
	return &v, nil
}

// optFloatPtr is obj[key] as a float64, nil when absent or null; a number
// a float64 cannot hold is refused, as json.Unmarshal refuses it.
func optFloatPtr(obj object, key string) (*float64, *Error) {
	raw, ok := obj[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	if e := optNumber(raw, key); e != nil {
		return nil, e
	}
	f, _ := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64) // optNumber parsed it
	return &f, nil
}

// jsonValue copies a JSON value that travels as JSON text (a schema), nil
// when absent or null.
func jsonValue(raw json.RawMessage) []byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return bytes.Clone(t)
}

// extraMembers collects the top-level members no typed field carries, as
// one JSON object (nil when there are none). Keys are sorted and values
// compacted, as json.Marshal writes a map.
func extraMembers(obj object) ([]byte, *Error) {
	var rest map[string]json.RawMessage
	for k, v := range obj {
		if normalizedKeys[k] {
			continue
		}
		if rest == nil {
			rest = make(map[string]json.RawMessage, len(obj))
		}
		rest[k] = v
	}
	if len(rest) == 0 {
		return nil, nil
	}
	out, err := json.Marshal(rest)
	if err != nil {
		return nil, InvalidRequest("The request body must be a JSON object.", "")
	}
	return out, nil
}

// NormalizeCompletion turns a validated completions body into the run
// input. The run path serves one prompt (several go through the tunnel):
// a list must hold exactly one string.
func NormalizeCompletion(body []byte) (*iop.RunInput, error) {
	return normalizeBody(body, completionInput)
}

// RunInput is NormalizeCompletion of the validated request.
func (r *CompletionRequest) RunInput() (*iop.RunInput, error) {
	return result(completionInput(topMembers(r.Raw)))
}

func completionInput(obj object) (*iop.RunInput, *Error) {
	in := &iop.RunInput{}
	list, e := stringOrList(obj["prompt"], "prompt")
	if e != nil || len(list) != 1 {
		return nil, invalidValue("prompt", "this model's provider takes one prompt string per request.")
	}
	in.Prompt = list[0]
	if in.Suffix, _, e = optString(obj["suffix"], "suffix"); e != nil {
		return nil, e
	}
	if in.Sampling, e = normalizeSampling(obj); e != nil {
		return nil, e
	}
	if in.Extra, e = extraMembers(obj); e != nil {
		return nil, e
	}
	return in, nil
}

// NormalizeEmbedding turns a validated embeddings body into the run input
// (strings only: token arrays need a provider reached through the tunnel).
func NormalizeEmbedding(body []byte) (*iop.RunInput, error) {
	return normalizeBody(body, embeddingInput)
}

// RunInput is NormalizeEmbedding of the validated request.
func (r *EmbeddingRequest) RunInput() (*iop.RunInput, error) {
	return result(embeddingInput(topMembers(r.Raw)))
}

func embeddingInput(obj object) (*iop.RunInput, *Error) {
	in := &iop.RunInput{}
	var e *Error
	if in.EmbedInputs, e = stringOrList(obj["input"], "input"); e != nil {
		return nil, invalidValue("input", "this model's provider takes a string or an array of strings.")
	}
	if d, has, e := optInt(obj["dimensions"], "dimensions", 1, math.MaxInt32); e != nil {
		return nil, e
	} else if has {
		in.Dimensions = &d
	}
	if in.Extra, e = extraMembers(obj); e != nil {
		return nil, e
	}
	return in, nil
}
