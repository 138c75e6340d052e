package openaiapi

import (
	"strings"
)

// Wire shapes of chat.completion, in OpenAI's field order. logprobs and
// refusal are always null: runs report neither.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Reasoning is the model's reasoning (thinking) text, under the name a
	// current vLLM gives it (ReasoningField); absent when there is none.
	Reasoning *string `json:"reasoning,omitempty"`
}

// ReasoningField is the member of a chat message (and of a chunk's delta)
// that carries reasoning text: "reasoning", as a current vLLM names it, so
// that a client sees the same field whether the model is served as a run
// or tunnelled to vLLM. Older vLLM versions, DeepSeek's API and llama.cpp
// call it "reasoning_content".
const ReasoningField = "reasoning"

// ChatAggregator renders a non-stream chat run as one chat.completion.
// Feed it the run's events with Add, then call Result. Not safe for
// concurrent use.
type ChatAggregator struct{ aggregation }

// NewChatAggregator starts the rendering of one run.
func NewChatAggregator(opts RenderOptions) *ChatAggregator {
	opts.fill("chatcmpl-")
	a := &ChatAggregator{aggregation{opts: opts}}
	a.st.countReasoning = true
	return a
}

// Result returns the chat.completion JSON, or the *Error to answer with when
// the run failed, was cancelled, or ended without a terminal event (e.g. the
// node was lost). Calling it again returns the same result.
//
// The message carries the run's content and its tool calls: the provider's
// native ones (metadata openai_tool_calls, content never parsed), or, for a
// run marked openai_text_tool_fallback, those restored from the content by
// ParseTextToolCalls (as RenderOptions.ToolNames and SingleToolCall
// allow). With tool calls and no other text, content is null and
// finish_reason is "tool_calls". The run's reasoning text, if any, is the
// message's ReasoningField, never part of its content.
func (a *ChatAggregator) Result() ([]byte, *Error) {
	if !a.rendered {
		a.rendered = true
		a.body, a.err = a.render()
	}
	return a.body, a.err
}

func (a *ChatAggregator) render() ([]byte, *Error) {
	if e := a.st.failure(); e != nil {
		a.usage, a.reported = a.st.finalUsage(a.opts.PromptTokens, a.text.Len())
		return nil, e
	}
	content := a.text.String()
	var calls []ToolCall
	if native := a.st.toolCalls; native != "" {
		var err error
		if calls, err = parseNativeToolCalls(native); err != nil {
			return nil, UpstreamError("The provider returned malformed tool calls.")
		}
	} else if a.st.textFallback() {
		content, calls = parseTextToolCalls(content, a.opts.ToolNames, a.opts.SingleToolCall)
	}
	msg := chatMessage{Role: "assistant", Content: &content, ToolCalls: calls}
	if len(calls) > 0 && strings.TrimSpace(content) == "" {
		msg.Content = nil
	}
	if a.reasoning.Len() > 0 {
		r := a.reasoning.String()
		msg.Reasoning = &r
	}
	a.finish = finishReason(a.st.finish, len(calls) > 0)
	// Reasoning is generated output too: providers count it in
	// completion_tokens, and so does the estimate.
	a.usage, a.reported = a.st.finalUsage(a.opts.PromptTokens, len(content)+toolCallBytes(calls)+a.reasoning.Len())
	body, err := marshalCompact(chatCompletion{
		ID:      a.opts.ID,
		Object:  "chat.completion",
		Created: a.opts.Created,
		Model:   a.opts.Model,
		Choices: []chatChoice{{Index: 0, Message: msg, FinishReason: a.finish}},
		Usage:   a.usage,
	})
	if err != nil {
		return nil, InternalError("Rendering the response failed.")
	}
	return body, nil
}

// toolCallBytes sizes tool calls for the completion-token estimate.
func toolCallBytes(calls []ToolCall) int {
	n := 0
	for _, c := range calls {
		n += len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}
