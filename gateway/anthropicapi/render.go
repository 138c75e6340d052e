package anthropicapi

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// Stop reasons of a Messages response.
const (
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
	StopSequence  = "stop_sequence"
	StopToolUse   = "tool_use"
	StopRefusal   = "refusal"
)

// Wire shapes of the Messages response, in Anthropic's field order.
type msgResponse struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	Model        string   `json:"model"`
	Content      []any    `json:"content"` // textOut and toolUseOut
	StopReason   *string  `json:"stop_reason"`
	StopSequence *string  `json:"stop_sequence"`
	Usage        usageOut `json:"usage"`
}

type usageOut struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type textOut struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// thinkingOut is a thinking block. Its signature is always empty: it is
// Anthropic's proof that Anthropic produced the thinking, which no other
// backend can give (see StreamWriter).
type thinkingOut struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseOut struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Wire shapes of the OpenAI answer this package reads (chat.completion and
// chat.completion.chunk share them: a chunk's choice has a delta where a
// completion's has a message).
type oaCompletion struct {
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage"`
	// Error is set on an error event inside a stream.
	Error json.RawMessage `json:"error"`
}

// oaModel is the model that answered, as an OpenAI answer or chunk
// names it (the provider's target on every route): the Messages answer's
// model. Empty when the upstream names none. Apart from oaCompletion so
// that a stream's chunks decode it only until message_start is written.
type oaModel struct {
	Model string `json:"model"`
}

// oaWhole is a whole (non-stream) completion with its model.
type oaWhole struct {
	oaModel
	oaCompletion
}

type oaChoice struct {
	Index        int      `json:"index"`
	Message      oaAnswer `json:"message"`
	Delta        oaAnswer `json:"delta"`
	FinishReason *string  `json:"finish_reason"`
	// StopReason is vLLM's extension: the stop string that ended the
	// output (or a stop token id, or null).
	StopReason json.RawMessage `json:"stop_reason"`
}

type oaAnswer struct {
	Content      *string            `json:"content"`
	ToolCalls    []oaAnswerToolCall `json:"tool_calls"`
	FunctionCall *oaFunctionCall    `json:"function_call"`
	// The model's reasoning: "reasoning" from the edge's run path and a
	// current vLLM, "reasoning_content" from older vLLM versions, DeepSeek
	// and llama.cpp (see thinkingText).
	Reasoning        *string `json:"reasoning"`
	ReasoningContent *string `json:"reasoning_content"`
}

// thinkingText is the reasoning text the answer carries under either name
// ("reasoning" wins should both come).
func (a *oaAnswer) thinkingText() string {
	switch {
	case a.Reasoning != nil && *a.Reasoning != "":
		return *a.Reasoning
	case a.ReasoningContent != nil:
		return *a.ReasoningContent
	}
	return ""
}

type oaAnswerToolCall struct {
	Index    int            `json:"index"`
	ID       string         `json:"id"`
	Function oaFunctionCall `json:"function"`
}

type oaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

var emptyObject = json.RawMessage("{}")

// RenderMessage translates a non-stream OpenAI chat.completion into a
// Messages response. Its model is the one the completion names (the
// provider's target, as the OpenAI surface answers: Anthropic's model
// field is the model that handled the request), or model (the name the
// caller asked for) when it names none. Only the first choice counts.
// inputTokens is the request's estimate (as NewStreamWriter takes):
// usage.input_tokens when the upstream reported no prompt tokens, so that
// the answer says what its streamed form's message_start would, not 0. It returns an error wrapping
// ErrMalformedUpstream when openaiBody is not a completion with a choice;
// answer that with a 502 api_error.
//
// Tool call arguments that are not a JSON object (truncated or malformed
// output of the model) become the input {}, which is also what Anthropic's
// SDKs make of a streamed tool input that does not parse.
//
// With thinking (the request enabled it, Request.Thinking) the message's
// reasoning becomes a thinking block before the others, as Anthropic
// places it; without, the reasoning is dropped, as Anthropic sends no
// thinking unless asked. Either way it counts in the output estimate: the
// model generated it.
func RenderMessage(openaiBody []byte, model string, stopSequences []string, inputTokens int, thinking bool) ([]byte, error) {
	return renderMessage(openaiBody, model, stopSequences, inputTokens, thinking, false)
}

// RenderMessageOmitted is RenderMessage for a request that enabled
// thinking with display "omitted" (Request.ThinkingOmitted): the thinking
// block keeps its place, its thinking text empty, as Anthropic answers.
func RenderMessageOmitted(openaiBody []byte, model string, stopSequences []string, inputTokens int) ([]byte, error) {
	return renderMessage(openaiBody, model, stopSequences, inputTokens, true, true)
}

func renderMessage(openaiBody []byte, model string, stopSequences []string, inputTokens int, thinking, omit bool) ([]byte, error) {
	var c oaWhole
	if err := json.Unmarshal(openaiBody, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedUpstream, err)
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("%w: no choices", ErrMalformedUpstream)
	}
	if c.Model != "" {
		model = c.Model
	}
	ch := c.Choices[0]
	for _, cand := range c.Choices {
		if cand.Index == 0 {
			ch = cand
			break
		}
	}
	content := make([]any, 0, 2+len(ch.Message.ToolCalls))
	reasoning := ch.Message.thinkingText()
	if thinking && reasoning != "" {
		shown := reasoning
		if omit {
			shown = ""
		}
		content = append(content, thinkingOut{Type: "thinking", Thinking: shown})
	}
	if t := ch.Message.Content; t != nil && *t != "" {
		content = append(content, textOut{Type: "text", Text: *t})
	}
	calls := ch.Message.ToolCalls
	if fc := ch.Message.FunctionCall; fc != nil && len(calls) == 0 {
		calls = []oaAnswerToolCall{{Function: *fc}}
	}
	outBytes := len(reasoning)
	if t := ch.Message.Content; t != nil {
		outBytes += len(*t)
	}
	for _, tc := range calls {
		outBytes += len(tc.Function.Name) + len(tc.Function.Arguments)
		content = append(content, toolUseOut{Type: "tool_use", ID: toolID(tc.ID), Name: tc.Function.Name, Input: objectOrEmpty(tc.Function.Arguments)})
	}
	reason, seq := stopReason(ch.FinishReason, ch.StopReason, len(calls) > 0, stopSequences)
	resp := msgResponse{
		ID: newID("msg_"), Type: "message", Role: "assistant", Model: model,
		Content: content, StopReason: &reason, StopSequence: seq,
	}
	resp.Usage.InputTokens = max(inputTokens, 0)
	if c.Usage != nil {
		if c.Usage.PromptTokens > 0 {
			resp.Usage.InputTokens = c.Usage.PromptTokens
		}
		resp.Usage.OutputTokens = max(c.Usage.CompletionTokens, 0)
	} else {
		// No usage reported: estimate the output.
		resp.Usage.OutputTokens = estimateOutput(outBytes)
	}
	return marshalCompact(resp)
}

// stopReason maps OpenAI's finish_reason (and vLLM's stop_reason) to
// Anthropic's stop_reason and stop_sequence:
//
//	stop            end_turn, or stop_sequence when vLLM's stop_reason is one
//	                of the request's stop sequences (then stop_sequence is it)
//	length          max_tokens
//	tool_calls      tool_use when calls were made, else end_turn (also
//	                function_call; stop with tool calls is tool_use too)
//	content_filter  refusal
//	anything else   end_turn (tool_use when tool calls were made)
func stopReason(finish *string, vllmStop json.RawMessage, toolCalls bool, stopSequences []string) (string, *string) {
	f := ""
	if finish != nil {
		f = *finish
	}
	switch f {
	case "length":
		return StopMaxTokens, nil
	case "content_filter":
		return StopRefusal, nil
	}
	// tool_use only with a call: it promises tool_use blocks, and an
	// upstream may say tool_calls without delivering one (a tool parser
	// that failed); the answer is then an ordinary end of turn.
	if toolCalls {
		return StopToolUse, nil
	}
	if f == "stop" {
		if s := jsonString(vllmStop); s != "" && slices.Contains(stopSequences, s) {
			return StopSequence, &s
		}
	}
	return StopEndTurn, nil
}

// objectOrEmpty is the tool input for OpenAI arguments: the arguments when
// they are a JSON object (compacted), else {}. Whitespace around the object
// is not part of the value: a streamed call's partial_json keeps it and the
// client's parse skips it, so the whole answer must not turn it into {}.
func objectOrEmpty(args string) json.RawMessage {
	raw := json.RawMessage(strings.Trim(args, " \t\r\n")) // JSON whitespace only
	if !json.Valid(raw) {
		return emptyObject
	}
	obj, e := compactObject(raw, "")
	if e != nil {
		return emptyObject
	}
	return obj
}

// toolID is the tool_use id for an OpenAI call id (generated when the
// upstream sent none).
func toolID(id string) string {
	if id == "" {
		return newID("toolu_")
	}
	return id
}

// newID is prefix + 26 random base32 characters.
func newID(prefix string) string { return prefix + rand.Text() }

// estimateOutput is the output token estimate when the upstream reported
// no usage: openaiapi.EstimateTokens over the bytes produced.
func estimateOutput(bytes int) int { return openaiapi.EstimateTokens(bytes, 0) }
