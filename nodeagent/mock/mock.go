// Package mock is a deterministic adapter answered inside the Node, for
// tests, demos and load experiments without a backend.
//
// Behaviour (operation in RunRequest.operation; empty means chat):
//   - chat: the input is an OpenAI chat request without "model". The reply
//     echoes the text of the LAST message whose role is "user", word by word
//     (strings.Fields): the first delta is the first word and every later
//     delta is " " + word, so the concatenation is the words joined by single
//     spaces. Array content contributes its "text" parts, joined by a space.
//     With no user message, or one without words, the reply is the single
//     delta EmptyReply.
//   - completion: {"prompt": string | [string]}; the words of all prompts are
//     echoed the same way (EmptyReply when there are none).
//   - embedding: {"input": string | [string]}; Result.Output is a JSON array
//     holding one deterministic EmbeddingDims-long unit vector per input.
//
// A chat or completion run's max_tokens (Sampling.max_tokens, from
// max_completion_tokens or max_tokens) caps the deltas as it caps an
// OpenAI model's tokens: a longer echo is cut after that many deltas and
// ends with FinishReason "length", otherwise "stop".
//
// Usage: prompt_tokens is the number of whitespace-separated words in the
// input (all messages, prompts or inputs), completion_tokens the number of
// deltas, total_tokens their sum.
//
// With SettingReasoning a chat run first sends that text's words as
// reasoning (adapter.Reasoning, the same split and pacing), then the echo;
// they count as deltas for max_tokens and completion_tokens.
//
// Settings: SettingDelayMS, SettingFailTrigger and SettingReasoning.
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// EmptyReply is the single delta of a run that has nothing to echo, so a
// client always sees a non-empty answer.
const EmptyReply = "(empty)"

// FailureMessage is the message of the error a fail_trigger run returns.
const FailureMessage = "mock failure"

// Instance is a configured mock adapter. It holds no mutable state, so it
// is safe for concurrent use.
type Instance struct {
	cfg config
}

var (
	_ adapter.Instance       = (*Instance)(nil)
	_ adapter.HealthReporter = (*Instance)(nil)
)

// New validates cfg and builds a mock instance. It matches adapter.Factory.
func New(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	log := env.Logger
	if log == nil {
		log = zap.NewNop()
	}
	c, err := parseConfig(cfg, log)
	if err != nil {
		return nil, err
	}
	return &Instance{cfg: c}, nil
}

// Run answers req as described in the package documentation.
func (m *Instance) Run(ctx context.Context, req *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mock: %w", err)
	}
	var (
		res *adapter.Result
		err error
	)
	switch op := req.GetOperation(); op {
	case adapter.OpChat:
		res, err = m.chat(ctx, req.GetInput(), sink)
	case adapter.OpCompletion:
		res, err = m.completion(ctx, req.GetInput(), sink)
	case adapter.OpEmbedding:
		res, err = embedding(req.GetInput())
	default:
		return nil, &adapter.Error{
			Code:    adapter.CodeUnsupported,
			Message: fmt.Sprintf("operation %s is not supported by the mock adapter", op),
			Err:     adapter.ErrUnsupported,
		}
	}
	if errors.Is(err, errBadInput) {
		return nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: err.Error(), Err: err}
	}
	return res, err
}

func (m *Instance) chat(ctx context.Context, input *iop.RunInput, sink adapter.RunSink) (*adapter.Result, error) {
	last, promptWords := chatText(input)
	fail := m.cfg.failTrigger != "" && last == m.cfg.failTrigger
	return m.echo(ctx, m.cfg.reasoning, strings.Fields(last), promptWords, input.GetSampling().GetMaxTokens(), fail, sink)
}

func (m *Instance) completion(ctx context.Context, input *iop.RunInput, sink adapter.RunSink) (*adapter.Result, error) {
	words := strings.Fields(input.GetPrompt())
	fail := m.cfg.failTrigger != "" && input.GetPrompt() == m.cfg.failTrigger
	return m.echo(ctx, nil, words, len(words), input.GetSampling().GetMaxTokens(), fail, sink)
}

// piece is one delta of a run: answer text, or reasoning.
type piece struct {
	text      string
	reasoning bool
}

// spaced appends words as pieces: the first as is, every later one after a
// space.
func spaced(dst []piece, words []string, reasoning bool) []piece {
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		dst = append(dst, piece{text: w, reasoning: reasoning})
	}
	return dst
}

// echo streams thoughts as reasoning, then words as deltas, pausing
// cfg.delay between two of them, at most maxTokens of them when it is
// positive.
func (m *Instance) echo(ctx context.Context, thoughts, words []string, promptWords int, maxTokens int64, fail bool, sink adapter.RunSink) (*adapter.Result, error) {
	deltas := spaced(make([]piece, 0, len(thoughts)+max(len(words), 1)), thoughts, true)
	deltas = spaced(deltas, words, false)
	if len(words) == 0 {
		deltas = append(deltas, piece{text: EmptyReply})
	}
	finish := "stop"
	if maxTokens > 0 && int64(len(deltas)) > maxTokens {
		deltas, finish = deltas[:maxTokens], "length"
	}

	var timer *time.Timer
	if m.cfg.delay > 0 {
		timer = time.NewTimer(m.cfg.delay)
		timer.Stop()
		defer timer.Stop()
	}
	for i, d := range deltas {
		if i > 0 {
			if err := m.pause(ctx, timer); err != nil {
				return nil, err
			}
		}
		if d.reasoning {
			if err := adapter.Reasoning(sink, d.text); err != nil {
				return nil, fmt.Errorf("mock: send reasoning: %w", err)
			}
		} else if err := sink.Delta(d.text); err != nil {
			return nil, fmt.Errorf("mock: send delta: %w", err)
		}
		if fail {
			// After the first delta on purpose: it exercises the mid-stream
			// failure path (SSE error event, no [DONE]).
			return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: FailureMessage}
		}
	}
	completion := int64(len(deltas))
	return &adapter.Result{
		FinishReason: finish,
		Usage: &iop.Usage{
			PromptTokens:     int64(promptWords),
			CompletionTokens: completion,
			TotalTokens:      int64(promptWords) + completion,
		},
	}, nil
}

// pause waits the configured delay, or only checks ctx when there is none.
func (m *Instance) pause(ctx context.Context, timer *time.Timer) error {
	if timer == nil {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mock: %w", err)
		}
		return nil
	}
	timer.Reset(m.cfg.delay)
	select {
	case <-ctx.Done():
		return fmt.Errorf("mock: %w", ctx.Err())
	case <-timer.C:
		return nil
	}
}

func embedding(input *iop.RunInput) (*adapter.Result, error) {
	texts := input.GetEmbedInputs()
	if len(texts) == 0 {
		return nil, fmt.Errorf("%w: input is required", errBadInput)
	}
	vectors := make([][]float64, len(texts))
	for i, t := range texts {
		vectors[i] = embed(t)
	}
	out, err := json.Marshal(vectors)
	if err != nil {
		return nil, fmt.Errorf("mock: encode embeddings: %w", err)
	}
	words := int64(countWords(texts))
	return &adapter.Result{
		FinishReason: "stop",
		Usage:        &iop.Usage{PromptTokens: words, TotalTokens: words},
		Output:       out,
	}, nil
}

// Tunnel is not served: the mock only answers normalized runs.
func (m *Instance) Tunnel(context.Context, *iop.ProviderTunnelRequest, adapter.TunnelSink) error {
	return adapter.ErrUnsupported
}

// Health always reports ok: there is no backend that could be down.
func (m *Instance) Health(context.Context) adapter.Health {
	return adapter.Health{Status: adapter.HealthOK}
}

// Close has nothing to release.
func (m *Instance) Close() error { return nil }

// Capabilities: the mock answers chat, completion and embedding runs.
func (m *Instance) Capabilities() *iop.AdapterCapabilities {
	return &iop.AdapterCapabilities{RunOperations: adapter.AllRunOperations, Streaming: true, Category: adapter.CategoryAPI}
}
