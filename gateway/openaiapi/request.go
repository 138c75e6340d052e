package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Request limits. They bound the work one request can cause at the edge
// (validation, estimation, rendering), not what a model accepts; providers
// enforce their own context limits.
const (
	// MaxMessages is the most messages a chat request may carry.
	MaxMessages = 10000
	// MaxOutputTokens bounds max_tokens / max_completion_tokens: larger values
	// are certainly mistakes, and accepting them would make every request look
	// unbounded to capacity planning.
	MaxOutputTokens = 1_000_000
	// MaxChoices bounds n. Only 1 can be served as a run (see RunSupported).
	MaxChoices = 128
)

// isChatRole reports whether role is one the chat endpoint accepts. The
// deprecated "function" role is not among them: the run path cannot render
// it and no supported backend needs it.
func isChatRole(role string) bool {
	switch role {
	case "system", "user", "assistant", "tool", "developer":
		return true
	}
	return false
}

// ChatRequest is a validated POST /v1/chat/completions body. Fields the edge
// does not interpret stay only in Raw and travel upstream untouched.
type ChatRequest struct {
	// Model is the external model name exactly as sent.
	Model string
	// Stream is the `stream` flag.
	Stream bool
	// IncludeUsage is stream_options.include_usage, and only true when
	// Stream is (OpenAI ignores it for non-stream requests).
	IncludeUsage bool
	// HasTools is true when `tools` is given: an empty array is refused.
	HasTools bool
	// ToolNames are the offered function names (tools[].function.name), in
	// order, without duplicates. Text tool calls are restored only for these
	// (and only as tool_choice allows: see RenderOptions).
	ToolNames []string
	// ToolChoice is tool_choice: "" when absent or null, else "none",
	// "auto", "required" or the type of a tool_choice object ("function").
	ToolChoice string
	// ToolChoiceName is tool_choice.function.name when ToolChoice is
	// "function".
	ToolChoiceName string
	// SingleToolCall is parallel_tool_calls: false.
	SingleToolCall bool
	// N is the `n` parameter (1 when absent).
	N int
	// MaxTokens is max_completion_tokens, else max_tokens, else 0 (unset).
	MaxTokens int
	// Logprobs is the `logprobs` flag: the caller wants each output token's
	// log probability, which only a tunnelled provider can return.
	Logprobs bool
	// MessageCount is len(messages).
	MessageCount int
	// PromptBytes is the UTF-8 size of everything EstimatePromptTokens counts
	// (see EstimateTokens).
	PromptBytes int
	// Raw is the request body as received. It aliases the caller's slice.
	Raw []byte
}

// nonTextPartBytes is what a non-text content part (image, audio, file)
// counts for in PromptBytes. Their encoded size says nothing about their
// token cost (a base64 image would count as hundreds of thousands of
// "tokens"), so a flat ~256-token charge keeps estimates sane.
const nonTextPartBytes = 1024

// EstimateTokens is the edge's prompt-size estimator: one token per 4 bytes
// of text (rounded up) plus 4 tokens of per-message framing. It is
// deliberately crude and tokenizer-free; it only decides whether a request is
// "long" (models[].long_context_tokens) and fills usage a provider did not
// report. Dispatch may use its own estimator from PromptBytes and
// MessageCount instead.
func EstimateTokens(textBytes, messages int) int {
	if textBytes < 0 {
		textBytes = 0
	}
	if messages < 0 {
		messages = 0
	}
	return (textBytes+3)/4 + 4*messages
}

// EstimatePromptTokens estimates the prompt size with EstimateTokens over the
// message text, tool calls and tool schemas.
func (r *ChatRequest) EstimatePromptTokens() int {
	return EstimateTokens(r.PromptBytes, r.MessageCount)
}

// RunSupported reports whether the request can be served as a normalized run
// rather than a tunnel. A run yields exactly one choice, so n > 1 is refused
// there (a tunnel passes n to the provider); and it carries no token log
// probabilities, so logprobs: true is refused rather than answered with
// "logprobs": null (as OpenAI refuses logprobs for models that cannot
// return them). Returns nil or an *Error 400.
func (r *ChatRequest) RunSupported() error {
	if r.N > 1 {
		return InvalidRequest("n > 1 is not supported for this model; request one choice per call.", "n")
	}
	if r.Logprobs {
		return InvalidRequest("logprobs are not supported for this model; send the request without logprobs.", "logprobs")
	}
	return nil
}

// RenderOptions returns the options the chat renderers need for this
// request; the caller may still set ID, Created and OnFirstWrite.
//
// Text tool calls are restored as tool_choice and parallel_tool_calls
// allow, whatever the model wrote: tool_choice none restores none (no
// ToolNames), a named function restores calls of that function only (the
// one name, when it is offered), and parallel_tool_calls false restores
// the first call only (SingleToolCall).
func (r *ChatRequest) RenderOptions() RenderOptions {
	return RenderOptions{
		Model:          r.Model,
		IncludeUsage:   r.IncludeUsage,
		ToolNames:      r.restorable(),
		SingleToolCall: r.SingleToolCall,
		PromptTokens:   r.EstimatePromptTokens(),
	}
}

// restorable are the function names whose text tool calls may be restored.
func (r *ChatRequest) restorable() []string {
	switch r.ToolChoice {
	case "none":
		return nil
	case "function":
		for i, n := range r.ToolNames {
			if n == r.ToolChoiceName {
				return r.ToolNames[i : i+1 : i+1]
			}
		}
		return nil
	}
	return r.ToolNames
}

// ParseChat validates a chat completions body. On failure it returns an
// *Error (400 invalid_request, Param naming the field) and a nil request.
// Unknown fields are accepted and preserved in Raw.
func ParseChat(body []byte) (*ChatRequest, error) {
	r, e := parseChat(body)
	if e != nil {
		return nil, e // never a typed nil inside the error interface
	}
	return r, nil
}

func parseChat(body []byte) (*ChatRequest, *Error) {
	var f fields
	if e := readTop(body, chatMembers, &f); e != nil {
		return nil, e
	}
	r := &ChatRequest{Raw: body, N: 1}
	var e *Error
	if r.Model, e = requiredString(f.get("model"), "model"); e != nil {
		return nil, e
	}

	rawMsgs := f.get("messages")
	if rawMsgs == nil || isNull(rawMsgs) {
		return nil, missingParam("messages")
	}
	if r.MessageCount, r.PromptBytes, e = validateMessages(rawMsgs); e != nil {
		return nil, e
	}

	if r.Stream, r.IncludeUsage, e = streamFields(f.get("stream"), f.get("stream_options")); e != nil {
		return nil, e
	}
	if e = chatTools(f.get("tools"), r); e != nil {
		return nil, e
	}
	if r.ToolChoice, r.ToolChoiceName, e = validateToolChoice(f.get("tool_choice")); e != nil {
		return nil, e
	}
	if r.ToolChoice != "" && r.ToolChoice != "none" && !r.HasTools {
		// OpenAI's answer, word for word: a run would be asked to call a
		// tool from nothing, and a tunnelled provider refuses it anyway.
		// "none" stays accepted: it asks for what having no tools gives.
		return nil, invalidValue("tool_choice", "'tool_choice' is only allowed when 'tools' are specified.")
	}
	if r.ToolChoice == "function" && !slices.Contains(r.ToolNames, r.ToolChoiceName) {
		// As OpenAI and vLLM answer: a run could only ignore the choice
		// (no tool may be restored), a tunnel would get this 400 anyway.
		return nil, InvalidRequest("tool_choice names a function that is not among tools.", "tool_choice")
	}
	if e = chatScalars(&f, r); e != nil {
		return nil, e
	}
	return r, nil
}

// validateMessages checks the messages array of the validated body and
// returns the number of messages and the bytes they contribute to the
// prompt estimate. Each message is read by scanning (scanFields): no
// element is validated or copied twice and no map is built for it, which
// matters on multi-MiB prompts, on long conversations and on every small
// request.
func validateMessages(raw json.RawMessage) (count, size int, e *Error) {
	var buf [16]json.RawMessage // most conversations, on the stack
	elems, ok := appendArray(buf[:0], raw)
	if !ok {
		return 0, 0, typeError("messages", "an array", raw)
	}
	if len(elems) == 0 {
		return 0, 0, invalidValue("messages", "expected an array with at least one message, but got an empty array.")
	}
	if len(elems) > MaxMessages {
		return 0, 0, invalidValue("messages", fmt.Sprintf("expected at most %d messages, but got %d.", MaxMessages, len(elems)))
	}
	var m messageFields
	for i, el := range elems {
		p := pname{base: "messages", i: i, j: -1}
		flagged, ok := fieldsOf(el, messageMembers, m[:])
		if !ok {
			return 0, 0, typeError(p.String(), "an object", el)
		}
		if flagged != "" {
			return 0, 0, messageMembers.refuse(flagged, p)
		}
		n, e := validateMessage(&m, p)
		if e != nil {
			return 0, 0, e
		}
		size += n
	}
	return len(elems), size, nil
}

// messageFields holds a message's members as validation reads them, by
// messageMembers' order (msgRole …); nil when absent.
type messageFields [len(messageNames)]json.RawMessage

// The names of messageMembers and contentPartMembers, and their positions.
var (
	messageNames = [...]string{msgRole: "role", msgContent: "content", msgName: "name",
		msgToolCallID: "tool_call_id", msgToolCalls: "tool_calls",
		msgReasoning: "reasoning", msgReasoningContent: "reasoning_content"}
	partNames = [...]string{partType: "type", partText: "text", partImageURL: "image_url", partRefusal: "refusal"}
)

const (
	msgRole = iota
	msgContent
	msgName
	msgToolCallID
	msgToolCalls
	// An assistant turn's earlier reasoning, sent back: "reasoning" as the
	// edge renders it (and vLLM and Ollama read it), "reasoning_content" as
	// DeepSeek and older vLLM versions name it.
	msgReasoning
	msgReasoningContent
)

const (
	partType = iota
	partText
	partImageURL
	partRefusal
)

// validateMessage checks one message and returns the bytes it contributes to
// the prompt estimate. p names the message.
func validateMessage(m *messageFields, p pname) (int, *Error) {
	rawRole := m[msgRole]
	if rawRole == nil || isNull(rawRole) {
		return 0, missingParam(p.dot(".role").String())
	}
	role, ok := asString(rawRole)
	if !ok {
		return 0, typeError(p.dot(".role").String(), "a string", rawRole)
	}
	if !isChatRole(role) {
		return 0, invalidValue(p.dot(".role").String(),
			fmt.Sprintf("expected one of 'system', 'user', 'assistant', 'tool' or 'developer', but got %s.", quoteValue(role)))
	}
	size := 0
	switch rawContent := m[msgContent]; {
	case rawContent == nil || isNull(rawContent):
		// An assistant turn that only called tools has no content.
		if role != "assistant" {
			return 0, missingParam(p.dot(".content").String())
		}
	default:
		cp := p
		cp.mid = ".content"
		n, e := validateContent(rawContent, cp)
		if e != nil {
			return 0, e
		}
		size += n
	}
	name, _, e := optStringAt(m[msgName], p.dot(".name"))
	if e != nil {
		return 0, e
	}
	size += len(name)
	if _, _, e := optStringAt(m[msgToolCallID], p.dot(".tool_call_id")); e != nil {
		return 0, e
	}
	// Reasoning sent back is type-checked on every role, as name is: a
	// backend that reads it (vLLM, Ollama) takes a string or refuses the
	// request. It does not count toward the prompt estimate: templates
	// render earlier reasoning only in part, if at all (Qwen 3 keeps it
	// after the last user message only), and Anthropic counts none.
	if _, e := messageReasoning(m, p, false); e != nil {
		return 0, e
	}
	if role == "assistant" {
		calls, _, e := optArrayAt(m[msgToolCalls], p.dot(".tool_calls"))
		if e != nil {
			return 0, e
		}
		for j, c := range calls {
			// A value of the validated document that opens with a brace is
			// an object; it is not decoded (nothing here reads inside it).
			if t := bytes.TrimSpace(c); len(t) == 0 || t[0] != '{' {
				cp := p
				cp.mid, cp.j = ".tool_calls", j
				return 0, typeError(cp.String(), "an object", c)
			}
			// The model re-reads its earlier calls, so they count as prompt.
			size += len(c)
		}
	}
	return size, nil
}

// messageReasoning checks that message m's "reasoning" and
// "reasoning_content" (p names m) are strings when present and not null,
// measuring them without decoding (reasoning can be long). With carry it
// returns the reasoning for the run input: "reasoning" when it holds text,
// else "reasoning_content", as the edge reads an answer's reasoning under
// the two names; only that one is decoded.
func messageReasoning(m *messageFields, p pname, carry bool) (string, *Error) {
	var n [2]int
	for i, at := range [...]int{msgReasoning, msgReasoningContent} {
		raw := m[at]
		if raw == nil || isNull(raw) {
			continue
		}
		var ok bool
		if n[i], ok = stringLen(raw); !ok {
			return "", typeError(p.dot("."+messageNames[at]).String(), "a string", raw)
		}
	}
	switch {
	case !carry:
		return "", nil
	case n[0] > 0:
		s, _ := asString(m[msgReasoning])
		return s, nil
	case n[1] > 0:
		s, _ := asString(m[msgReasoningContent])
		return s, nil
	}
	return "", nil
}

// validateContent accepts a string or a non-empty array of typed parts and
// returns the bytes it contributes to the prompt estimate. p names the
// content (p.j is -1; each part sets it).
func validateContent(raw json.RawMessage, p pname) (int, *Error) {
	if n, ok := stringLen(raw); ok {
		return n, nil
	}
	var buf [4]json.RawMessage
	parts, ok := appendArray(buf[:0], raw)
	if !ok {
		return 0, typeError(p.String(), "a string or an array of content parts", raw)
	}
	if len(parts) == 0 {
		return 0, invalidValue(p.String(), "expected a string or a non-empty array of content parts, but got an empty array.")
	}
	size := 0
	var part [len(partNames)]json.RawMessage // by contentPartMembers' order
	for k, raw := range parts {
		pp := p
		pp.j = k
		flagged, ok := fieldsOf(raw, contentPartMembers, part[:])
		if !ok {
			return 0, typeError(pp.String(), "an object", raw)
		}
		if flagged != "" {
			return 0, contentPartMembers.refuse(flagged, pp)
		}
		rawType := part[partType]
		if rawType == nil || isNull(rawType) {
			return 0, missingParam(pp.dot(".type").String())
		}
		typ, ok := asString(rawType)
		if !ok {
			return 0, typeError(pp.dot(".type").String(), "a string", rawType)
		}
		// A text part carries its text; a refusal part (an assistant's
		// earlier refusal, sent back in the conversation) its refusal.
		if at, field := partText, ".text"; typ == "text" || typ == "refusal" {
			if typ == "refusal" {
				at, field = partRefusal, ".refusal"
			}
			rawText := part[at]
			if rawText == nil || isNull(rawText) {
				return 0, missingParam(pp.dot(field).String())
			}
			n, ok := stringLen(rawText)
			if !ok {
				return 0, typeError(pp.dot(field).String(), "a string", rawText)
			}
			size += n
			continue
		}
		size += nonTextPartBytes
	}
	return size, nil
}

// chatTools validates `tools` (raw) and records the offered function
// names. Non-function tool types (e.g. "custom") pass through unexamined;
// they are offered to the provider but never restored from text.
func chatTools(raw json.RawMessage, r *ChatRequest) *Error {
	tools, given, e := optArray(raw, "tools")
	if e != nil {
		return e
	}
	if given && len(tools) == 0 {
		// OpenAI's answer, word for word (Azure, DeepSeek and vLLM since
		// 2026-04 refuse it too): the SDKs leave an empty list out
		// (Vercel's AI SDK, pydantic-ai, Continue), so accepting it would
		// only let a request through that a provider behind the edge may
		// refuse in its own words.
		return InvalidRequest("Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead.", "tools")
	}
	seen := make(map[string]bool, len(tools))
	var tool, fn fields
	for i, t := range tools {
		tp := pname{base: "tools", i: i, j: -1}
		flagged, ok := tool.read(t, toolMembers)
		if !ok {
			return typeError(tp.String(), "an object", t)
		}
		if flagged != "" {
			return toolMembers.refuse(flagged, tp)
		}
		typ, hasType, e := optStringAt(tool.get("type"), tp.dot(".type"))
		if e != nil {
			return e
		}
		if hasType && typ != "function" {
			r.PromptBytes += len(t)
			continue
		}
		given, e := optFieldsAt(tool.get("function"), tp.dot(".function"), toolFunctionMembers, &fn)
		if e != nil {
			return e
		}
		if !given {
			return missingParam(tp.dot(".function").String())
		}
		name, e := requiredStringAt(fn.get("name"), tp.dot(".function.name"))
		if e != nil {
			return e
		}
		if _, _, e := optStringAt(fn.get("description"), tp.dot(".function.description")); e != nil {
			return e
		}
		if e := checkObject(fn.get("parameters"), tp.dot(".function.parameters")); e != nil {
			return e
		}
		if !seen[name] {
			seen[name] = true
			r.ToolNames = append(r.ToolNames, name)
		}
		// The provider renders the schemas into the prompt.
		r.PromptBytes += len(t)
	}
	r.HasTools = len(tools) > 0
	return nil
}

// validateToolChoice accepts null, "none", "auto", "required" or an object
// with a string type (and, for "function", a function name). It returns
// the mode (the string, or the object's type; "" when absent or null) and,
// for "function", the function's name.
func validateToolChoice(raw json.RawMessage) (mode, name string, e *Error) {
	if raw == nil || isNull(raw) {
		return "", "", nil
	}
	if s, ok := asString(raw); ok {
		switch s {
		case "none", "auto", "required":
			return s, "", nil
		}
		return "", "", invalidValue("tool_choice", fmt.Sprintf("expected 'none', 'auto', 'required' or an object, but got %s.", quoteValue(s)))
	}
	var choice fields
	flagged, ok := choice.read(raw, toolChoiceMembers)
	if !ok {
		return "", "", typeError("tool_choice", "a string or an object", raw)
	}
	if flagged != "" {
		return "", "", toolChoiceMembers.refuse(flagged, pn("tool_choice"))
	}
	typ, e := requiredString(choice.get("type"), "tool_choice.type")
	if e != nil {
		return "", "", e
	}
	if typ == "function" {
		var fn fields
		given, e := optFieldsAt(choice.get("function"), pn("tool_choice.function"), choiceFunctionMember, &fn)
		if e != nil {
			return "", "", e
		}
		if !given {
			return "", "", missingParam("tool_choice.function")
		}
		if name, e = requiredString(fn.get("name"), "tool_choice.function.name"); e != nil {
			return "", "", e
		}
	}
	return typ, name, nil
}

// chatScalars type-checks the sampling and output parameters of the top
// level f.
func chatScalars(f *fields, r *ChatRequest) *Error {
	maxTokens, _, e := optInt(f.get("max_tokens"), "max_tokens", 1, MaxOutputTokens)
	if e != nil {
		return e
	}
	maxCompletion, hasMaxCompletion, e := optInt(f.get("max_completion_tokens"), "max_completion_tokens", 1, MaxOutputTokens)
	if e != nil {
		return e
	}
	r.MaxTokens = int(maxTokens)
	if hasMaxCompletion {
		r.MaxTokens = int(maxCompletion)
	}
	n, hasN, e := optInt(f.get("n"), "n", 1, MaxChoices)
	if e != nil {
		return e
	}
	if hasN {
		r.N = int(n)
	}
	if e := samplingNumbers(f); e != nil {
		return e
	}
	if _, _, e := optInt(f.get("seed"), "seed", -1<<63, 1<<63-1); e != nil {
		return e
	}
	if _, _, e := optInt(f.get("top_logprobs"), "top_logprobs", 0, 20); e != nil {
		return e
	}
	if r.Logprobs, e = optBool(f.get("logprobs"), "logprobs"); e != nil {
		return e
	}
	if raw := f.get("parallel_tool_calls"); raw != nil && !isNull(raw) {
		parallel, e := optBool(raw, "parallel_tool_calls")
		if e != nil {
			return e
		}
		if !r.HasTools {
			// OpenAI's answer, word for word (Azure's too); the SDKs send
			// it only when the app sets it, and agent frameworks that set
			// it on every call dropped it without tools because of this
			// 400 (swarm, camel, Upsonic). An OpenAI-shaped provider
			// behind the edge would refuse it the same way.
			return invalidValue("parallel_tool_calls", "'parallel_tool_calls' is only allowed when 'tools' are specified.")
		}
		r.SingleToolCall = !parallel
	}
	if _, _, e := optString(f.get("user"), "user"); e != nil {
		return e
	}
	if e := checkObject(f.get("response_format"), pn("response_format")); e != nil {
		return e
	}
	return validateStop(f.get("stop"))
}

// samplingNumbers checks the sampling parameters chat and completions
// share (members of the top level f), each a number when given.
func samplingNumbers(f *fields) *Error {
	for _, k := range [...]string{"temperature", "top_p", "presence_penalty", "frequency_penalty"} {
		if e := optNumber(f.get(k), k); e != nil {
			return e
		}
	}
	return nil
}

// validateStop accepts null, a string or an array of strings (raw is
// `stop`).
func validateStop(raw json.RawMessage) *Error {
	if raw == nil || isNull(raw) {
		return nil
	}
	if _, ok := asString(raw); ok {
		return nil
	}
	arr, ok := asArray(raw)
	if !ok {
		return typeError("stop", "a string or an array of strings", raw)
	}
	for i, s := range arr {
		if _, ok := asString(s); !ok {
			return typeError(fmt.Sprintf("stop[%d]", i), "a string", s)
		}
	}
	return nil
}
