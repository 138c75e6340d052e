package ollama

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// streamOutcome is what a finished NDJSON stream reported.
type streamOutcome struct {
	doneReason string
	usage      *iop.Usage
	toolCalls  []chunkToolCall
}

// textOf picks the generated text out of a chunk: message.content for
// /api/chat, response for /api/generate, and beside it the reasoning a
// thinking model wrote (message.thinking, thinking). ok reports whether the
// chunk carried the answer's field at all: a stream none of whose lines did
// is not an answer from that endpoint (e.g. a proxy's JSON, or another API).
type textOf func(*chunk) (text, thinking string, ok bool)

func chatText(c *chunk) (string, string, bool) {
	if c.Message == nil {
		return "", "", false
	}
	return c.Message.Content, c.Message.Thinking, true
}

func generateText(c *chunk) (string, string, bool) {
	if c.Response == nil {
		return "", c.Thinking, false
	}
	return *c.Response, c.Thinking, true
}

// readStream relays the text of each line to sink until the line with
// "done": true, a line's thinking first (as reasoning, which a sink without
// use for it drops) and then its content: Ollama's parser ends the thinking
// and starts the answer within one line at the switch. Anything else is an
// upstream error, never a short success: a body that ends (or breaks) before
// that line, a line that is not a JSON object, or a stream that finished
// without any line carrying the endpoint's answer field. Tool calls are
// collected from every line: Ollama streams each call whole, in a line of
// its own, before the final one.
func readStream(body io.Reader, text textOf, sink adapter.RunSink) (*streamOutcome, error) {
	lines := newLineReader(body, MaxLineBytes)
	var out streamOutcome
	answered := false
	callBytes := 0 // names and arguments in out.toolCalls
	for {
		line, err := lines.next()
		switch {
		case errors.Is(err, io.EOF):
			return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama stream ended unexpectedly", Err: ErrStreamTruncated}
		case errors.Is(err, ErrLineTooLong):
			return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama sent a stream line over 8 MiB", Err: err}
		case err != nil:
			// Run reports a cancellation or timeout instead when that is
			// what broke the read; otherwise Ollama went away mid-answer.
			return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama stream was interrupted", Err: err}
		}
		c, err := decodeChunk(line)
		if err != nil {
			return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama sent a malformed stream line", Err: err}
		}
		if msg := c.errorText(); msg != "" {
			return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: msg, Err: errors.New("ollama: error line in stream")}
		}
		t, thinking, ok := text(c)
		answered = answered || ok
		if thinking != "" {
			if err := adapter.Reasoning(sink, thinking); err != nil {
				return nil, fmt.Errorf("ollama: send reasoning: %w", err)
			}
		}
		if t != "" {
			if err := sink.Delta(t); err != nil {
				return nil, fmt.Errorf("ollama: send delta: %w", err)
			}
		}
		if c.Message != nil {
			for _, tc := range c.Message.ToolCalls {
				callBytes += len(tc.Function.Name) + len(tc.Function.Arguments)
				if len(out.toolCalls) == adapter.MaxToolCalls || callBytes > adapter.MaxToolCallBytes {
					return nil, adapter.ToolCallsTooLarge()
				}
				out.toolCalls = append(out.toolCalls, tc)
			}
		}
		if c.Done {
			if !answered {
				return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama's response contained no answer", Err: ErrNoAnswer}
			}
			out.doneReason = c.DoneReason
			out.usage = usageOf(c)
			return &out, nil
		}
	}
}

func usageOf(c *chunk) *iop.Usage {
	if c.PromptEvalCount == nil && c.EvalCount == nil {
		return nil
	}
	var u iop.Usage
	if c.PromptEvalCount != nil {
		u.PromptTokens = max(*c.PromptEvalCount, 0)
	}
	if c.EvalCount != nil {
		u.CompletionTokens = max(*c.EvalCount, 0)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

// result turns a finished stream into the run's Result.
func (s *streamOutcome) result() (*adapter.Result, error) {
	res := &adapter.Result{FinishReason: "stop", Usage: s.usage}
	if s.doneReason == "length" {
		res.FinishReason = "length"
	}
	if len(s.toolCalls) > 0 {
		calls, err := openAIToolCalls(s.toolCalls)
		if err != nil {
			return nil, err
		}
		// "length" stands with calls, as OpenAI reports an answer cut
		// short: it may have been writing a further call, and an agent
		// loop must not take the answer as complete.
		if res.FinishReason != "length" {
			res.FinishReason = "tool_calls"
		}
		res.Metadata = map[string]string{adapter.MetaToolCalls: calls}
	}
	return res, nil
}

type openAIToolCallOut struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openAIToolCalls renders Ollama tool calls in the OpenAI shape the Edge
// restores: arguments re-encoded as a JSON string. Ollama's own call id is
// kept when it has one (newer versions send it) and unique; otherwise a
// random "call_" id is minted.
func openAIToolCalls(calls []chunkToolCall) (string, error) {
	out := make([]openAIToolCallOut, len(calls))
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		id := c.ID
		if id == "" || seen[id] {
			id = "call_" + rand.Text()
		}
		seen[id] = true
		out[i].ID = id
		out[i].Type = "function"
		out[i].Function.Name = c.Function.Name
		args, err := stringArguments(c.Function.Arguments)
		if err != nil {
			return "", err
		}
		out[i].Function.Arguments = args
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("ollama: encode tool calls: %w", err)
	}
	return string(b), nil
}

// stringArguments re-encodes Ollama's arguments object as the JSON string
// OpenAI clients parse. An argument already given as a string is kept.
func stringArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama sent malformed tool call arguments", Err: err}
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama sent malformed tool call arguments", Err: err}
	}
	return buf.String(), nil
}
