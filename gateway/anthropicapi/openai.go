package anthropicapi

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Wire shapes of the OpenAI chat completions request this package builds.
type oaRequest struct {
	Model             string           `json:"model"`
	Messages          []oaMessage      `json:"messages"`
	MaxTokens         int              `json:"max_tokens,omitempty"`
	Stream            bool             `json:"stream,omitempty"`
	StreamOptions     *oaStreamOptions `json:"stream_options,omitempty"`
	Stop              []string         `json:"stop,omitempty"`
	Temperature       *float64         `json:"temperature,omitempty"`
	TopP              *float64         `json:"top_p,omitempty"`
	TopK              int              `json:"top_k,omitempty"`
	Tools             []oaTool         `json:"tools,omitempty"`
	ToolChoice        any              `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool            `json:"parallel_tool_calls,omitempty"`
	User              string           `json:"user,omitempty"`
	// ReasoningEffort is output_config.effort in OpenAI's terms
	// (Request.reasoningEffort); omitted when there is none to send.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// ResponseFormat is the output format (Request.responseFormat);
	// omitted for a free-text answer.
	ResponseFormat *oaResponseFormat `json:"response_format,omitempty"`
	// AddGenerationPrompt and ContinueFinalMessage are vLLM's members
	// that continue a final assistant message (a prefill) instead of
	// opening a new turn after it: vLLM defaults them to true and false,
	// and refuses both true. Sent (false and true) only in a body for vLLM
	// (TunnelChat with ReasoningVLLM) of a Request with Prefill: servers
	// that do not know them (OpenAI) refuse them.
	AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
	ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// oaMessage.Content is a string, a []oaPart, or nil (null: an assistant
// message with only tool calls).
type oaMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
	// Reasoning is an assistant turn's thinking, under the name the edge
	// renders it by and vLLM's chat messages take it by (vLLM hands it to
	// the template as reasoning and reasoning_content); omitted when empty,
	// so a conversation without thinking is the body it always was.
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningContent is the same thinking under the name llama.cpp's
	// server (and DeepSeek's API) take it by, for a tunnel to llama.cpp
	// (ReasoningContent); a message carries one of the two at most.
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string       `json:"tool_call_id,omitempty"`
}

type oaPart struct {
	Type     string      `json:"type"`
	Text     *string     `json:"text,omitempty"`
	ImageURL *oaImageURL `json:"image_url,omitempty"`
}

type oaImageURL struct {
	URL string `json:"url"`
}

type oaToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is the tool's strict (tool.strict): only true is sent, so a
	// server that does not know the member (older llama.cpp, Ollama's
	// OpenAI layer) sees the body it always did for a tool without it.
	Strict bool `json:"strict,omitempty"`
}

type oaNamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// toolErrorPrefix starts the content of the tool message of a tool_result
// with is_error: OpenAI tool messages have no error flag, and without it the
// model would take an error text for a normal result.
const toolErrorPrefix = "Error: "

// OpenAIChat renders the request as an OpenAI chat completions body (see the
// package documentation for the mapping), assistant thinking included as
// reasoning: the body a normalized run is parsed from. It fails only if the
// request was not produced by ParseRequest.
func (r *Request) OpenAIChat() ([]byte, error) { return r.openAIChat(ReasoningVLLM, false) }

// ChatMember is the member OpenAIChat's rendering counts as for a caller
// that keeps one rendering and asks TunnelChat for another when the member
// its provider reads differs: ReasoningVLLM, whose tunnel body is that very
// rendering, except for a prefill, whose body for vLLM adds vLLM's
// continuation (oaRequest.ContinueFinalMessage): then ReasoningRun, so that
// every first tunnel renders its own.
func (r *Request) ChatMember() ReasoningMember {
	if r.Prefill {
		return ReasoningRun
	}
	return ReasoningVLLM
}

// ReasoningMember names the assistant message member by which a tunnel
// body carries earlier thinking (TunnelChat). The names differ by server
// and no name is safe everywhere: vLLM reads only "reasoning" (it renamed
// reasoning_content in late 2025 and removed the old name), llama.cpp's
// server reads only "reasoning_content", and strict OpenAI-compatible
// servers refuse a message member they do not know (Groq: "property
// 'reasoning' is unsupported"), which would fail every later turn of a
// thinking conversation.
type ReasoningMember string

const (
	// ReasoningNone leaves earlier thinking out, and with it a middle turn
	// of thinking and empty text: for a server of unknown kind.
	ReasoningNone ReasoningMember = ""
	// ReasoningVLLM is vLLM's member, the one OpenAIChat renders.
	ReasoningVLLM ReasoningMember = "reasoning"
	// ReasoningContent is llama.cpp's member (DeepSeek's name).
	ReasoningContent ReasoningMember = "reasoning_content"
	// ReasoningRun is OpenAIChat's rendering of a prefill (ChatMember):
	// thinking as ReasoningVLLM carries it, without vLLM's continuation.
	// No tunnel reads by it.
	ReasoningRun ReasoningMember = "reasoning (run)"
)

// TunnelChat is the body a tunnel to a server that reads earlier thinking
// by member receives, given chat, a rendering of the request (OpenAIChat's,
// or an earlier TunnelChat's): chat itself when no assistant turn carries
// thinking text (every rendering is then the same bytes), else the request
// rendered again with the thinking under member, or without it
// (ReasoningNone; a middle turn of thinking and empty text is left out
// with it, as it would be an empty assistant message). Models whose
// templates keep the reasoning within a tool loop (Qwen 3, gpt-oss,
// DeepSeek, MiniMax) see their chain; templates that drop earlier
// reasoning drop it, as on a run. The caller keeps a rendering for the
// member it carries: asking for that member again renders the same bytes.
//
// The member names the server too: a prefill (Prefill) is always
// rendered again, with vLLM's continuation for ReasoningVLLM and without
// it for any other member. llama.cpp's server continues a final assistant
// message by itself (its prefill_assistant, on unless the server was
// started with --no-prefill-assistant); any other server gets the message
// as it is, as no member that asks for a continuation is safe there.
func (r *Request) TunnelChat(chat []byte, member ReasoningMember) ([]byte, error) {
	if !r.carriesThinking() && !r.Prefill {
		return chat, nil
	}
	return r.openAIChat(member, true)
}

// carriesThinking reports whether OpenAIChat sends reasoning: an assistant
// turn it renders holds thinking text.
func (r *Request) carriesThinking() bool {
	for i, m := range r.messages {
		if m.role != "assistant" {
			continue
		}
		if assistantKeeps(m.blocks, true, i < len(r.messages)-1) && thinkingText(m.blocks) {
			return true
		}
	}
	return false
}

// thinkingText reports whether blocks hold a thinking block with text.
func thinkingText(blocks []block) bool {
	for _, b := range blocks {
		if b.typ == blockThinking && b.text != "" {
			return true
		}
	}
	return false
}

// openAIChat renders the chat body with earlier thinking under member;
// tunnel: the body of a tunnel to the server member names (TunnelChat).
func (r *Request) openAIChat(member ReasoningMember, tunnel bool) ([]byte, error) {
	if member == ReasoningRun {
		member = ReasoningVLLM
	}
	out := oaRequest{
		Model:       r.Model,
		MaxTokens:   r.MaxTokens,
		Stream:      r.Stream,
		Stop:        r.StopSequences,
		Temperature: r.temperature,
		TopP:        r.topP,
		TopK:        r.topK,
		User:        r.userID,

		ReasoningEffort: r.reasoningEffort(),
		ResponseFormat:  r.responseFormat(),
	}
	if r.Stream {
		out.StreamOptions = &oaStreamOptions{IncludeUsage: true}
	}
	if r.Prefill && tunnel && member == ReasoningVLLM {
		no := false
		out.AddGenerationPrompt, out.ContinueFinalMessage = &no, true
	}
	out.Messages = make([]oaMessage, 0, len(r.messages)+1)
	if len(r.system) > 0 {
		out.Messages = append(out.Messages, oaMessage{Role: "system", Content: strings.Join(r.system, "\n\n")})
	}
	for i, m := range r.messages {
		if m.role == "assistant" {
			out.Messages = appendAssistant(out.Messages, m.blocks, member, i < len(r.messages)-1)
		} else {
			out.Messages = appendUser(out.Messages, m.blocks)
		}
	}
	if len(r.tools) > 0 {
		out.Tools = make([]oaTool, len(r.tools))
		for i, t := range r.tools {
			out.Tools[i] = oaTool{Type: "function", Function: oaFunction{Name: t.name, Description: t.description, Parameters: t.schema, Strict: t.strict}}
		}
		// tool_choice and parallel_tool_calls only with tools: OpenAI
		// refuses them without.
		if tc := r.toolChoice; tc != nil {
			switch tc.typ {
			case "auto", "none":
				out.ToolChoice = tc.typ
			case "any":
				out.ToolChoice = "required"
			case "tool":
				named := oaNamedToolChoice{Type: "function"}
				named.Function.Name = tc.name
				out.ToolChoice = named
			}
			if tc.disableParallel && tc.typ != "none" {
				f := false
				out.ParallelToolCalls = &f
			}
		}
	}
	b, err := marshalCompact(out)
	if err != nil {
		return nil, fmt.Errorf("anthropicapi: encode chat request: %w", err)
	}
	return b, nil
}

// appendAssistant renders an assistant turn: its text blocks joined into the
// content string, its thinking blocks joined into its reasoning (in order,
// as the edge's chat answer holds the reasoning of a stream that had two
// thinking blocks), its tool_use blocks as tool_calls. A turn with neither
// text nor calls (only thinking, or an empty final prefill) adds nothing:
// an assistant message without content or calls is refused by OpenAI's
// API, and thinking cut short before an answer has nothing to go with.
// The one exception is a middle turn whose answer was empty text after
// thinking, when reasoning is rendered (member is not ReasoningNone): it
// is kept with empty content, so the model sees its own earlier thinking
// and the turns keep alternating (Ollama, vLLM and llama.cpp take such a
// message as it is).
func appendAssistant(msgs []oaMessage, blocks []block, member ReasoningMember, middle bool) []oaMessage {
	reasoning := member != ReasoningNone
	if !assistantKeeps(blocks, reasoning, middle) {
		return msgs
	}
	var text, thinking strings.Builder
	var calls []oaToolCall
	for _, b := range blocks {
		switch b.typ {
		case blockText:
			text.WriteString(b.text)
		case blockThinking:
			if reasoning {
				thinking.WriteString(b.text)
			}
		case blockToolUse:
			calls = append(calls, oaToolCall{ID: b.id, Type: "function", Function: oaFunctionCall{Name: b.name, Arguments: string(b.input)}})
		}
	}
	m := oaMessage{Role: "assistant", ToolCalls: calls}
	if member == ReasoningContent {
		m.ReasoningContent = thinking.String()
	} else {
		m.Reasoning = thinking.String()
	}
	if text.Len() > 0 || len(calls) == 0 {
		m.Content = text.String()
	}
	return append(msgs, m)
}

// assistantKeeps reports whether appendAssistant renders an assistant turn
// of blocks: it has text or a tool call, or (a middle turn, reasoning
// rendered) thinking text before a text block left empty.
func assistantKeeps(blocks []block, reasoning, middle bool) bool {
	if assistantRenders(blocks) {
		return true
	}
	if !reasoning || !middle || !thinkingText(blocks) {
		return false
	}
	for _, b := range blocks {
		if b.typ == blockText {
			return true
		}
	}
	return false
}

// hasTurn reports whether the conversation renders at least one message:
// a user turn always does (the parser refuses empty ones), an assistant
// turn when appendAssistant keeps it.
func (r *Request) hasTurn() bool {
	for _, m := range r.messages {
		if m.role != "assistant" || assistantRenders(m.blocks) {
			return true
		}
	}
	return false
}

// assistantRenders reports whether appendAssistant renders an assistant
// turn of blocks whatever the body: it has text or a tool call.
func assistantRenders(blocks []block) bool {
	for _, b := range blocks {
		if b.typ == blockToolUse || (b.typ == blockText && b.text != "") {
			return true
		}
	}
	return false
}

// appendUser renders a user turn: one tool message per tool_result first
// (OpenAI requires them right after the assistant's tool calls), then a user
// message with the remaining text and image parts. Images inside tool
// results go to that user message too, since OpenAI tool messages carry
// text only.
func appendUser(msgs []oaMessage, blocks []block) []oaMessage {
	var parts []oaPart
	results := 0
	for _, b := range blocks {
		switch b.typ {
		case blockText, blockImage:
			parts = appendPart(parts, b)
		case blockToolResult:
			results++
			var text strings.Builder
			sep := ""
			for _, c := range b.content {
				if c.typ == blockText {
					text.WriteString(sep)
					text.WriteString(c.text)
					sep = "\n"
				} else {
					parts = appendPart(parts, c)
				}
			}
			content := text.String()
			if b.isError {
				content = toolErrorPrefix + content
				if content == toolErrorPrefix {
					content = "Error"
				}
			}
			msgs = append(msgs, oaMessage{Role: "tool", ToolCallID: b.toolUseID, Content: content})
		}
	}
	switch {
	case len(parts) == 0 && results > 0:
		return msgs
	case len(parts) == 0:
		// Only empty text: keep the turn so the conversation's shape stays.
		return append(msgs, oaMessage{Role: "user", Content: ""})
	case len(parts) == 1 && parts[0].Type == "text":
		return append(msgs, oaMessage{Role: "user", Content: *parts[0].Text})
	default:
		return append(msgs, oaMessage{Role: "user", Content: parts})
	}
}

func appendPart(parts []oaPart, b block) []oaPart {
	if b.typ == blockText {
		if b.text == "" {
			return parts
		}
		t := b.text
		return append(parts, oaPart{Type: "text", Text: &t})
	}
	url := b.url
	if url == "" {
		url = "data:" + b.mediaType + ";base64," + b.data
	}
	return append(parts, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: url}})
}
