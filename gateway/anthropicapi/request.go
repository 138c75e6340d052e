package anthropicapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// Request limits. They bound the work one request causes at the edge
// (validation, translation, estimation), not what a model accepts; providers
// enforce their own context limits.
const (
	// MaxMessages is the most messages a request may carry (as for OpenAI
	// chat requests).
	MaxMessages = openaiapi.MaxMessages
	// MaxContentBlocks bounds the content blocks of a whole request: system
	// blocks, message blocks and the blocks nested in tool results.
	MaxContentBlocks = 100_000
	// MaxTools is the most tools a request may offer.
	MaxTools = 1024
	// MaxStopSequences is the most stop sequences a request may carry.
	// OpenAI itself accepts only 4; vLLM any number. More than 4 therefore
	// reach the upstream, which decides.
	MaxStopSequences = 64
	// MaxOutputTokens bounds max_tokens, as for OpenAI requests.
	MaxOutputTokens = openaiapi.MaxOutputTokens
	// MaxToolNameLen is Anthropic's limit on a tool name ([a-zA-Z0-9_-]).
	MaxToolNameLen = 128
	// MaxUserIDLen bounds metadata.user_id (Anthropic's limit).
	MaxUserIDLen = 256
)

// Request is a validated POST /v1/messages (or count_tokens) body.
type Request struct {
	// Model is the external model name exactly as sent.
	Model string
	// Stream is the `stream` flag.
	Stream bool
	// MaxTokens is max_tokens (0 only for a count_tokens request without it).
	MaxTokens int
	// StopSequences are stop_sequences, in order; RenderMessage and
	// NewStreamWriter need them to report stop_reason "stop_sequence".
	StopSequences []string
	// Thinking is whether the request enabled extended thinking
	// (thinking.type "enabled", "adaptive" or "between_tools"): only then
	// does the answer
	// carry the model's reasoning as thinking blocks (Options.Thinking).
	Thinking bool
	// ThinkingOff is whether the request turned thinking off
	// (thinking.type "disabled"): a run on a backend that can stop a model
	// thinking is told so, as is a tunnel to vLLM or llama.cpp (see the
	// package documentation); elsewhere the reasoning is dropped from the
	// answer, as without thinking.
	ThinkingOff bool
	// ThinkingOmitted is whether the request asked for its thinking
	// without its text (thinking.display "omitted"): the answer keeps its
	// thinking blocks, each with empty thinking text, as Anthropic's API
	// answers (RenderMessageOmitted, StreamWriter.OmitThinking).
	ThinkingOmitted bool
	// Prefill is whether the conversation ends with an assistant message
	// the answer continues (Anthropic's prefill): text with content and
	// no tool call. The answer is the continuation only, without the
	// prefill's text. A final assistant message with no text is dropped
	// from the chat body (appendAssistant), not continued. Thinking
	// cannot be on with one (parse refuses it, as Anthropic's API does).
	Prefill bool

	// effort is output_config.effort as sent ("" when absent), one of
	// the levels efforts lists; the chat body carries it as
	// reasoning_effort (reasoningEffort).
	effort string
	// format is the JSON output format (output_config.format, or the
	// deprecated output_format), nil when the answer is free text; the
	// chat body carries it as response_format (responseFormat).
	format *outputFormat
	// thinkingUpdates: thinking.display was "updates", which Anthropic's
	// API takes only under a beta (CheckBetas); it reads as "omitted".
	thinkingUpdates bool

	system      []string // text of the system blocks, in order
	messages    []message
	tools       []tool
	toolChoice  *toolChoice
	temperature *float64
	topP        *float64
	topK        int // 0: not set
	userID      string
}

type message struct {
	role   string // "user" or "assistant"
	blocks []block
}

// Block types the request may carry. A thinking block (assistant turns
// only) keeps its text, which goes back as the turn's reasoning; redacted
// thinking is accepted and dropped at parse time, so it never appears in a
// block.
const (
	blockText       = "text"
	blockImage      = "image"
	blockToolUse    = "tool_use"
	blockToolResult = "tool_result"
	blockThinking   = "thinking"
)

type block struct {
	typ  string
	text string // text; thinking: the thinking text
	// image: url for a URL source, else mediaType and data (base64)
	url, mediaType, data string
	// tool_use
	id, name string
	input    json.RawMessage // a compact JSON object
	// tool_result: toolUseID, isError and content (text and image blocks)
	toolUseID string
	isError   bool
	content   []block
}

type tool struct {
	name, description string
	schema            json.RawMessage // a compact JSON object
	// strict is the tool's "strict": true (Anthropic's strict tool use:
	// inputs constrained to the schema), sent as OpenAI's function.strict
	// when the schema meets OpenAI's strict mode (strictSchema): OpenAI
	// holds a strict function's parameters to the same rules as a strict
	// response_format and refuses the whole request (400
	// invalid_function_parameters) for a schema outside them, an optional
	// property say, which Anthropic takes. Such a tool goes without strict
	// (the model is asked for the schema, not held to it), as a format
	// does. Absent, null and false are all false: nothing is sent,
	// OpenAI's default.
	strict bool
}

type toolChoice struct {
	typ             string // auto, any, tool, none
	name            string // for typ "tool"
	disableParallel bool
}

// imageMediaTypes are the base64 image types Anthropic accepts.
var imageMediaTypes = map[string]bool{
	"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true,
}

// ParseRequest decodes and validates a Messages request. It is strict about
// JSON syntax (one object, nothing after it), the types of every field it
// knows and the content block types, and returns a 400 invalid_request_error
// naming the offending field otherwise. Unknown fields are ignored, at the
// top level and inside blocks and tools: Anthropic clients routinely send
// fields that only steer Anthropic's own billing or caching (cache_control,
// service_tier, context_management, …), and refusing them would make this
// surface unusable for those clients. What the request may ask only
// under a beta is checked by CheckBetas, given the request's headers.
func ParseRequest(body []byte) (*Request, *Error) { return parse(body, true) }

// ParseCountRequest validates a POST /v1/messages/count_tokens body: the
// same as ParseRequest except that max_tokens is optional (the endpoint does
// not take it).
func ParseCountRequest(body []byte) (*Request, *Error) { return parse(body, false) }

type parser struct {
	blocks int // content blocks seen, bounded by MaxContentBlocks
}

func parse(body []byte, needMaxTokens bool) (*Request, *Error) {
	obj, e := decodeBody(body)
	if e != nil {
		return nil, e
	}
	p := &parser{}
	r := &Request{}
	raw, ok := field(obj, "model")
	if !ok {
		return nil, invalid("model: Field required")
	}
	if r.Model, e = str(raw, "model"); e != nil {
		return nil, e
	}
	if r.Model == "" {
		return nil, invalid("model: must not be empty")
	}
	if raw, ok = field(obj, "max_tokens"); ok {
		if r.MaxTokens, e = integer(raw, "max_tokens"); e != nil {
			return nil, e
		}
		if r.MaxTokens < 1 || r.MaxTokens > MaxOutputTokens {
			return nil, invalid("max_tokens: must be between 1 and %d", MaxOutputTokens)
		}
	} else if needMaxTokens {
		return nil, invalid("max_tokens: Field required")
	}
	if raw, ok = field(obj, "messages"); !ok {
		return nil, invalid("messages: Field required")
	}
	if r.messages, e = p.messages(raw); e != nil {
		return nil, e
	}
	if raw, ok = field(obj, "system"); ok {
		if r.system, e = p.system(raw); e != nil {
			return nil, e
		}
	}
	// A lone assistant turn with nothing to send on (an empty prefill,
	// or thinking alone) and no system prompt would convert to a chat body
	// without messages, refused downstream in OpenAI's words.
	if len(r.system) == 0 && !r.hasTurn() {
		return nil, invalid("messages: at least one message with content is required (an empty final assistant message is a prefill, not a turn)")
	}
	if raw, ok = field(obj, "stream"); ok {
		if r.Stream, e = boolean(raw, "stream"); e != nil {
			return nil, e
		}
	}
	if e = r.scalars(obj); e != nil {
		return nil, e
	}
	if raw, ok = field(obj, "tools"); ok {
		if r.tools, e = tools(raw); e != nil {
			return nil, e
		}
	}
	if raw, ok = field(obj, "tool_choice"); ok {
		if r.toolChoice, e = parseToolChoice(raw, r.tools); e != nil {
			return nil, e
		}
	}
	if raw, ok = field(obj, "thinking"); ok {
		tc, e := thinking(raw)
		if e != nil {
			return nil, e
		}
		r.Thinking = tc.typ != thinkingDisabled
		r.ThinkingOff = tc.typ == thinkingDisabled
		r.ThinkingOmitted = tc.omitted
		r.thinkingUpdates = tc.updates
	}
	r.Prefill = prefill(r.messages)
	if r.Prefill && r.Thinking {
		// Anthropic's API: prefilling "is not currently supported with
		// extended thinking". llama.cpp's server refuses a final assistant
		// message with its template's thinking on, too; others would
		// answer a thinking turn after text the model never thought for.
		return nil, invalid("messages: a final assistant message (a prefill) cannot be used when thinking is enabled")
	}
	if r.Prefill && endsInSpace(r.messages[len(r.messages)-1].blocks) {
		// Anthropic's API refuses it in these words. A server would not
		// continue it either: a chat template that strips the message
		// loses the space the continuation was to follow, and vLLM's
		// continuation of a prefill of only whitespace finds nothing to
		// continue (transformers' continue_final_message looks for the
		// stripped text) and generates after the closed turn.
		return nil, invalid("messages: final assistant content cannot end with trailing whitespace")
	}
	if raw, ok = field(obj, "output_config"); ok {
		if r.effort, r.format, e = outputConfig(raw); e != nil {
			return nil, e
		}
	}
	if r.format, e = outputFormats(obj, r.format); e != nil {
		return nil, e
	}
	return r, nil
}

// thinkingConfig is a parsed thinking object.
type thinkingConfig struct {
	typ     string // enabled, adaptive, between_tools or disabled
	omitted bool   // display "omitted" (or "updates") on a thinking type
	updates bool   // display "updates" on a thinking type (see CheckBetas)
}

// thinking parses the thinking configuration as Anthropic's API does: the
// type is required and must be known (taken as no thinking, a misspelt
// "disabled" would leave the model thinking, and a type-less object is
// refused by Anthropic). budget_tokens is checked for its type only, on
// every type: no upstream here has a thinking budget (the model thinks as
// it was configured to, max_tokens bounding the whole answer), and
// clients send budgets Anthropic would refuse — Claude Code sends budgets
// at or over max_tokens (with or without the interleaved-thinking beta,
// depending on the model name it is given), and clients written for other
// Anthropic-style APIs send "enabled" without a budget — so bounding a
// value nothing reads would only refuse working clients.
//
// display ("summarized", the default, or "omitted") is read on the types
// that think; "updates" (a beta that returns progress notes between tool
// calls and hides the reasoning) is taken as "omitted", there being no
// such notes here, when the request names its beta (CheckBetas: the
// header is not the body's to parse). Any other value is refused, as
// Anthropic refuses it.
func thinking(raw json.RawMessage) (thinkingConfig, *Error) {
	var tc thinkingConfig
	obj, e := object(raw, "thinking")
	if e != nil {
		return tc, e
	}
	t, ok := field(obj, "type")
	if !ok {
		return tc, invalid("thinking.type: Field required")
	}
	if tc.typ, e = str(t, "thinking.type"); e != nil {
		return tc, e
	}
	switch tc.typ {
	case "enabled", "adaptive", "between_tools", thinkingDisabled:
	default:
		return tc, invalid("thinking.type: must be one of enabled, adaptive, between_tools, disabled")
	}
	if b, ok := field(obj, "budget_tokens"); ok {
		if _, e := integer(b, "thinking.budget_tokens"); e != nil {
			return tc, e
		}
	}
	if tc.typ == thinkingDisabled {
		return tc, nil
	}
	if d, ok := field(obj, "display"); ok {
		display, e := str(d, "thinking.display")
		if e != nil {
			return tc, e
		}
		switch display {
		case "summarized":
		case "omitted", "updates":
			tc.omitted = true
			tc.updates = display == "updates"
		default:
			return tc, invalid("thinking.display: must be one of summarized, omitted")
		}
	}
	return tc, nil
}

// thinkingDisabled is the thinking.type that turns thinking off; every
// other accepted type (enabled, adaptive, between_tools) lets the model
// think and shows its reasoning as thinking blocks.
const thinkingDisabled = "disabled"

// scalars parses the sampling and bookkeeping fields.
func (r *Request) scalars(obj map[string]json.RawMessage) *Error {
	var e *Error
	if raw, ok := field(obj, "stop_sequences"); ok {
		elems, e := array(raw, "stop_sequences")
		if e != nil {
			return e
		}
		if len(elems) > MaxStopSequences {
			return invalid("stop_sequences: at most %d are allowed", MaxStopSequences)
		}
		for i, el := range elems {
			s, e := str(el, fmt.Sprintf("stop_sequences.%d", i))
			if e != nil {
				return e
			}
			if s == "" {
				return invalid("stop_sequences.%d: must not be empty", i)
			}
			r.StopSequences = append(r.StopSequences, s)
		}
	}
	// temperature follows Anthropic's range 0..1 (not OpenAI's 0..2) so that
	// a request valid here is valid at Anthropic and vice versa; the value
	// goes upstream unchanged, the softmax temperature means the same on
	// both APIs.
	if r.temperature, e = unitFloat(obj, "temperature"); e != nil {
		return e
	}
	if r.topP, e = unitFloat(obj, "top_p"); e != nil {
		return e
	}
	if raw, ok := field(obj, "top_k"); ok {
		if r.topK, e = integer(raw, "top_k"); e != nil {
			return e
		}
		if r.topK < 0 {
			return invalid("top_k: must be greater than or equal to 0")
		}
	}
	if raw, ok := field(obj, "metadata"); ok {
		md, e := object(raw, "metadata")
		if e != nil {
			return e
		}
		if raw, ok := field(md, "user_id"); ok {
			if r.userID, e = str(raw, "metadata.user_id"); e != nil {
				return e
			}
			if len(r.userID) > MaxUserIDLen {
				return invalid("metadata.user_id: at most %d bytes", MaxUserIDLen)
			}
		}
	}
	return nil
}

func unitFloat(obj map[string]json.RawMessage, name string) (*float64, *Error) {
	raw, ok := field(obj, name)
	if !ok {
		return nil, nil
	}
	f, e := number(raw, name)
	if e != nil {
		return nil, e
	}
	if f < 0 || f > 1 {
		return nil, invalid("%s: must be between 0 and 1", name)
	}
	return &f, nil
}

func (p *parser) messages(raw json.RawMessage) ([]message, *Error) {
	elems, e := array(raw, "messages")
	if e != nil {
		return nil, e
	}
	if len(elems) == 0 {
		return nil, invalid("messages: at least one message is required")
	}
	if len(elems) > MaxMessages {
		return nil, invalid("messages: at most %d messages are allowed", MaxMessages)
	}
	msgs := make([]message, len(elems))
	for i, el := range elems {
		path := fmt.Sprintf("messages.%d", i)
		m, e := object(el, path)
		if e != nil {
			return nil, e
		}
		rawRole, ok := field(m, "role")
		if !ok {
			return nil, invalid("%s.role: Field required", path)
		}
		role, e := str(rawRole, path+".role")
		if e != nil {
			return nil, e
		}
		if role != "user" && role != "assistant" {
			return nil, invalid("%s.role: must be \"user\" or \"assistant\"", path)
		}
		rawContent, ok := field(m, "content")
		if !ok {
			return nil, invalid("%s.content: Field required", path)
		}
		blocks, e := p.content(rawContent, role, path+".content")
		if e != nil {
			return nil, e
		}
		// Anthropic requires content everywhere but in a final assistant
		// message (a prefill). Thinking alone is no content: the turn has
		// no answer to send on (appendAssistant leaves it out).
		if !hasAnswer(blocks) && (role != "assistant" || i != len(elems)-1) {
			return nil, invalid("%s.content: must not be empty", path)
		}
		msgs[i] = message{role: role, blocks: blocks}
	}
	return msgs, nil
}

// prefill reports whether msgs end with an assistant message to continue:
// one with text and no tool call (a turn of tool calls is answered by
// tool results, and llama.cpp's server refuses to continue one).
func prefill(msgs []message) bool {
	if len(msgs) == 0 || msgs[len(msgs)-1].role != "assistant" {
		return false
	}
	text := false
	for _, b := range msgs[len(msgs)-1].blocks {
		switch {
		case b.typ == blockToolUse:
			return false
		case b.typ == blockText && b.text != "":
			text = true
		}
	}
	return text
}

// endsInSpace reports whether the text of blocks, their text blocks one
// after another, ends in white space (unicode.IsSpace).
func endsInSpace(blocks []block) bool {
	for i := len(blocks) - 1; i >= 0; i-- {
		if b := blocks[i]; b.typ == blockText && b.text != "" {
			r, _ := utf8.DecodeLastRuneInString(b.text)
			return unicode.IsSpace(r)
		}
	}
	return false
}

// hasAnswer reports whether blocks hold more than thinking.
func hasAnswer(blocks []block) bool {
	for _, b := range blocks {
		if b.typ != blockThinking {
			return true
		}
	}
	return false
}

// content parses a message's content: a string (one text block) or an array
// of blocks allowed for role.
func (p *parser) content(raw json.RawMessage, role, path string) ([]block, *Error) {
	if isString(raw) {
		s, e := str(raw, path)
		if e != nil {
			return nil, e
		}
		if e = p.count(path); e != nil {
			return nil, e
		}
		if s == "" {
			return nil, nil
		}
		return []block{{typ: blockText, text: s}}, nil
	}
	elems, e := array(raw, path)
	if e != nil {
		return nil, invalid("%s: expected a string or an array of content blocks", path)
	}
	blocks := make([]block, 0, len(elems))
	for i, el := range elems {
		bpath := fmt.Sprintf("%s.%d", path, i)
		if e := p.count(bpath); e != nil {
			return nil, e
		}
		b, keep, e := p.block(el, role, bpath)
		if e != nil {
			return nil, e
		}
		if keep {
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

func (p *parser) count(path string) *Error {
	p.blocks++
	if p.blocks > MaxContentBlocks {
		return invalid("%s: the request has more than %d content blocks", path, MaxContentBlocks)
	}
	return nil
}

// block parses one content block; keep is false for blocks accepted but
// dropped (redacted thinking, and thinking without text).
func (p *parser) block(raw json.RawMessage, role, path string) (b block, keep bool, e *Error) {
	obj, e := object(raw, path)
	if e != nil {
		return b, false, e
	}
	typ, e := blockType(obj, path)
	if e != nil {
		return b, false, e
	}
	switch typ {
	case blockText:
		b, e = textBlock(obj, path)
	case blockImage:
		if role != "user" {
			return b, false, invalid("%s: image blocks are only allowed in user messages", path)
		}
		b, e = imageBlock(obj, path)
	case blockToolUse:
		if role != "assistant" {
			return b, false, invalid("%s: tool_use blocks are only allowed in assistant messages", path)
		}
		b, e = toolUseBlock(obj, path)
	case blockToolResult:
		if role != "user" {
			return b, false, invalid("%s: tool_result blocks are only allowed in user messages", path)
		}
		b, e = p.toolResultBlock(obj, path)
	case blockThinking, "redacted_thinking":
		// Clients replay the thinking of earlier turns (Anthropic's SDKs
		// send the assistant content back as it came). Its text goes back
		// as the turn's reasoning: the templates of models that think
		// between tool calls (Qwen 3, gpt-oss, DeepSeek) want it there.
		// Redacted thinking is Anthropic's ciphertext, of use to no other
		// model; the signature is Anthropic's proof, and is not checked.
		if role != "assistant" {
			return b, false, invalid("%s: %s blocks are only allowed in assistant messages", path, typ)
		}
		if typ != blockThinking {
			return b, false, nil
		}
		b, e = thinkingBlock(obj, path)
		return b, e == nil && b.text != "", e
	default:
		return b, false, invalid("%s.type: content block type %q is not supported (supported: text, image, tool_use, tool_result)", path, truncate(typ, 64))
	}
	return b, e == nil, e
}

func blockType(obj map[string]json.RawMessage, path string) (string, *Error) {
	raw, ok := field(obj, "type")
	if !ok {
		return "", invalid("%s.type: Field required", path)
	}
	return str(raw, path+".type")
}

func textBlock(obj map[string]json.RawMessage, path string) (block, *Error) {
	raw, ok := field(obj, "text")
	if !ok {
		return block{}, invalid("%s.text: Field required", path)
	}
	s, e := str(raw, path+".text")
	return block{typ: blockText, text: s}, e
}

// thinkingBlock parses a thinking block: its thinking must be a string
// when present (Anthropic requires it; a client that leaves it out has no
// text to send back).
func thinkingBlock(obj map[string]json.RawMessage, path string) (block, *Error) {
	raw, ok := field(obj, "thinking")
	if !ok {
		return block{typ: blockThinking}, nil
	}
	s, e := str(raw, path+".thinking")
	return block{typ: blockThinking, text: s}, e
}

func imageBlock(obj map[string]json.RawMessage, path string) (block, *Error) {
	raw, ok := field(obj, "source")
	if !ok {
		return block{}, invalid("%s.source: Field required", path)
	}
	src, e := object(raw, path+".source")
	if e != nil {
		return block{}, e
	}
	typ, e := blockType(src, path+".source")
	if e != nil {
		return block{}, e
	}
	b := block{typ: blockImage}
	switch typ {
	case "base64":
		if b.mediaType, e = requiredString(src, "media_type", path+".source"); e != nil {
			return b, e
		}
		if !imageMediaTypes[b.mediaType] {
			return b, invalid("%s.source.media_type: must be one of image/jpeg, image/png, image/gif, image/webp", path)
		}
		if b.data, e = requiredString(src, "data", path+".source"); e != nil {
			return b, e
		}
		if b.data == "" {
			return b, invalid("%s.source.data: must not be empty", path)
		}
	case "url":
		if b.url, e = requiredString(src, "url", path+".source"); e != nil {
			return b, e
		}
		if !strings.HasPrefix(b.url, "https://") && !strings.HasPrefix(b.url, "http://") {
			return b, invalid("%s.source.url: must be an http or https URL", path)
		}
	default:
		return b, invalid("%s.source.type: image source type %q is not supported (supported: base64, url)", path, truncate(typ, 64))
	}
	return b, nil
}

func toolUseBlock(obj map[string]json.RawMessage, path string) (block, *Error) {
	b := block{typ: blockToolUse}
	var e *Error
	if b.id, e = requiredString(obj, "id", path); e != nil {
		return b, e
	}
	if b.id == "" {
		return b, invalid("%s.id: must not be empty", path)
	}
	if b.name, e = requiredString(obj, "name", path); e != nil {
		return b, e
	}
	if b.name == "" {
		return b, invalid("%s.name: must not be empty", path)
	}
	raw, ok := field(obj, "input")
	if !ok {
		return b, invalid("%s.input: Field required", path)
	}
	b.input, e = compactObject(raw, path+".input")
	return b, e
}

func (p *parser) toolResultBlock(obj map[string]json.RawMessage, path string) (block, *Error) {
	b := block{typ: blockToolResult}
	var e *Error
	if b.toolUseID, e = requiredString(obj, "tool_use_id", path); e != nil {
		return b, e
	}
	if b.toolUseID == "" {
		return b, invalid("%s.tool_use_id: must not be empty", path)
	}
	if raw, ok := field(obj, "is_error"); ok {
		if b.isError, e = boolean(raw, path+".is_error"); e != nil {
			return b, e
		}
	}
	raw, ok := field(obj, "content")
	if !ok {
		return b, nil // a tool result without output
	}
	cpath := path + ".content"
	if isString(raw) {
		s, e := str(raw, cpath)
		if s != "" {
			b.content = []block{{typ: blockText, text: s}}
		}
		return b, e
	}
	elems, e := array(raw, cpath)
	if e != nil {
		return b, invalid("%s: expected a string or an array of text and image blocks", cpath)
	}
	for i, el := range elems {
		ipath := fmt.Sprintf("%s.%d", cpath, i)
		if e := p.count(ipath); e != nil {
			return b, e
		}
		inner, e := object(el, ipath)
		if e != nil {
			return b, e
		}
		typ, e := blockType(inner, ipath)
		if e != nil {
			return b, e
		}
		var c block
		switch typ {
		case blockText:
			c, e = textBlock(inner, ipath)
		case blockImage:
			c, e = imageBlock(inner, ipath)
		default:
			return b, invalid("%s.type: tool_result content block type %q is not supported (supported: text, image)", ipath, truncate(typ, 64))
		}
		if e != nil {
			return b, e
		}
		b.content = append(b.content, c)
	}
	return b, nil
}

// system parses `system`: a string or an array of text blocks.
func (p *parser) system(raw json.RawMessage) ([]string, *Error) {
	if isString(raw) {
		s, e := str(raw, "system")
		if e != nil || s == "" {
			return nil, e
		}
		return []string{s}, nil
	}
	elems, e := array(raw, "system")
	if e != nil {
		return nil, invalid("system: expected a string or an array of text blocks")
	}
	var out []string
	for i, el := range elems {
		path := fmt.Sprintf("system.%d", i)
		if e := p.count(path); e != nil {
			return nil, e
		}
		obj, e := object(el, path)
		if e != nil {
			return nil, e
		}
		typ, e := blockType(obj, path)
		if e != nil {
			return nil, e
		}
		if typ != blockText {
			return nil, invalid("%s.type: only text blocks are allowed in system", path)
		}
		b, e := textBlock(obj, path)
		if e != nil {
			return nil, e
		}
		if b.text != "" {
			out = append(out, b.text)
		}
	}
	return out, nil
}

func tools(raw json.RawMessage) ([]tool, *Error) {
	elems, e := array(raw, "tools")
	if e != nil {
		return nil, e
	}
	if len(elems) > MaxTools {
		return nil, invalid("tools: at most %d tools are allowed", MaxTools)
	}
	out := make([]tool, 0, len(elems))
	seen := make(map[string]bool, len(elems))
	for i, el := range elems {
		path := fmt.Sprintf("tools.%d", i)
		obj, e := object(el, path)
		if e != nil {
			return nil, e
		}
		if rawType, ok := field(obj, "type"); ok {
			typ, e := str(rawType, path+".type")
			if e != nil {
				return nil, e
			}
			if typ != "custom" {
				return nil, invalid("%s.type: tool type %q is not supported (only client tools with an input_schema)", path, truncate(typ, 64))
			}
		}
		var t tool
		if t.name, e = requiredString(obj, "name", path); e != nil {
			return nil, e
		}
		if !validToolName(t.name) {
			return nil, invalid("%s.name: must match ^[a-zA-Z0-9_-]{1,%d}$", path, MaxToolNameLen)
		}
		if seen[t.name] {
			return nil, invalid("%s.name: tool names must be unique", path)
		}
		seen[t.name] = true
		if rawDesc, ok := field(obj, "description"); ok {
			if t.description, e = str(rawDesc, path+".description"); e != nil {
				return nil, e
			}
		}
		rawSchema, ok := field(obj, "input_schema")
		if !ok {
			return nil, invalid("%s.input_schema: Field required", path)
		}
		if t.schema, e = compactObject(rawSchema, path+".input_schema"); e != nil {
			return nil, e
		}
		if rawStrict, ok := field(obj, "strict"); ok {
			if t.strict, e = boolean(rawStrict, path+".strict"); e != nil {
				return nil, e
			}
			// Walked only when asked for: most tools are not strict.
			t.strict = t.strict && strictSchema(t.schema)
		}
		out = append(out, t)
	}
	return out, nil
}

func validToolName(s string) bool {
	if s == "" || len(s) > MaxToolNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func parseToolChoice(raw json.RawMessage, offered []tool) (*toolChoice, *Error) {
	obj, e := object(raw, "tool_choice")
	if e != nil {
		return nil, e
	}
	tc := &toolChoice{}
	if tc.typ, e = blockType(obj, "tool_choice"); e != nil {
		return nil, e
	}
	switch tc.typ {
	case "auto", "none":
	case "any":
		if len(offered) == 0 {
			return nil, invalid("tool_choice: type \"any\" requires tools")
		}
	case "tool":
		if tc.name, e = requiredString(obj, "name", "tool_choice"); e != nil {
			return nil, e
		}
		found := false
		for _, t := range offered {
			found = found || t.name == tc.name
		}
		if !found {
			return nil, invalid("tool_choice.name: %q is not one of the offered tools", truncate(tc.name, 128))
		}
	default:
		return nil, invalid("tool_choice.type: must be one of auto, any, tool, none")
	}
	if raw, ok := field(obj, "disable_parallel_tool_use"); ok {
		if tc.disableParallel, e = boolean(raw, "tool_choice.disable_parallel_tool_use"); e != nil {
			return nil, e
		}
	}
	return tc, nil
}
