package openaiapi

import (
	"encoding/json"
	"fmt"
	"math"
)

// MaxEmbeddingInputs is the most inputs one embeddings request may carry
// (OpenAI's own limit).
const MaxEmbeddingInputs = 2048

// tokenBytes is what one token of a pre-tokenized prompt counts for in
// PromptBytes, so that EstimateTokens returns the token count for it.
const tokenBytes = 4

// CompletionRequest is a validated POST /v1/completions (legacy) body.
type CompletionRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool // stream_options.include_usage, only when Stream
	N            int  // 1 when absent
	// PromptCount is the number of prompts: 1 for a string or a single
	// token array, len(prompt) for a batch.
	PromptCount int
	// PromptBytes feeds EstimateTokens (token arrays count tokenBytes per
	// token).
	PromptBytes int
	// Logprobs: `logprobs` is set (any number, 0 included, asks for them);
	// Echo: `echo` is true. Only a tunnelled provider returns either.
	Logprobs, Echo bool
	Raw            []byte
}

// EstimatePromptTokens estimates the prompt size with EstimateTokens.
func (r *CompletionRequest) EstimatePromptTokens() int {
	return EstimateTokens(r.PromptBytes, 0)
}

// RunSupported reports whether the request can be served as a run, which
// yields exactly one choice: batches of prompts and n > 1 only work through
// a tunnel. Returns nil or an *Error 400.
func (r *CompletionRequest) RunSupported() error {
	if r.PromptCount > 1 {
		return InvalidRequest("Batched prompts are not supported for this model; send one prompt per call.", "prompt")
	}
	if r.N > 1 {
		return InvalidRequest("n > 1 is not supported for this model; request one choice per call.", "n")
	}
	// A run returns the generated text only: no log probabilities, and no
	// prompt echoed in front of it. Ignoring either would answer a
	// different question than the one asked (echo with max_tokens 0 scores
	// a prompt).
	if r.Logprobs {
		return InvalidRequest("logprobs are not supported for this model; send the request without logprobs.", "logprobs")
	}
	if r.Echo {
		return InvalidRequest("echo is not supported for this model; send the request without echo.", "echo")
	}
	return nil
}

// RenderOptions returns the options the completion renderers need.
func (r *CompletionRequest) RenderOptions() RenderOptions {
	return RenderOptions{
		Model:        r.Model,
		IncludeUsage: r.IncludeUsage,
		PromptTokens: r.EstimatePromptTokens(),
	}
}

// ParseCompletion validates a legacy completions body: model, prompt (a
// string, an array of strings, a token array or an array of token arrays),
// stream, stream_options, max_tokens (0 allowed: with echo it asks for the
// prompt only) and n. On failure it returns an *Error 400.
func ParseCompletion(body []byte) (*CompletionRequest, error) {
	r, e := parseCompletion(body)
	if e != nil {
		return nil, e
	}
	return r, nil
}

func parseCompletion(body []byte) (*CompletionRequest, *Error) {
	var f fields
	if e := readTop(body, completionMembers, &f); e != nil {
		return nil, e
	}
	r := &CompletionRequest{Raw: body, N: 1}
	var e *Error
	if r.Model, e = requiredString(f.get("model"), "model"); e != nil {
		return nil, e
	}
	raw := f.get("prompt")
	if raw == nil || isNull(raw) {
		return nil, missingParam("prompt")
	}
	if r.PromptCount, r.PromptBytes, e = promptShape(raw, "prompt", false); e != nil {
		return nil, e
	}
	if r.Stream, r.IncludeUsage, e = streamFields(f.get("stream"), f.get("stream_options")); e != nil {
		return nil, e
	}
	if _, _, e = optInt(f.get("max_tokens"), "max_tokens", 0, MaxOutputTokens); e != nil {
		return nil, e
	}
	n, hasN, e := optInt(f.get("n"), "n", 1, MaxChoices)
	if e != nil {
		return nil, e
	}
	if hasN {
		r.N = int(n)
	}
	if e := samplingNumbers(&f); e != nil {
		return nil, e
	}
	if r.Echo, e = optBool(f.get("echo"), "echo"); e != nil {
		return nil, e
	}
	// An integer (OpenAI takes up to 5, vLLM up to its max_logprobs: the
	// provider bounds it).
	if _, r.Logprobs, e = optInt(f.get("logprobs"), "logprobs", 0, math.MaxInt32); e != nil {
		return nil, e
	}
	if _, _, e := optString(f.get("suffix"), "suffix"); e != nil {
		return nil, e
	}
	if e := validateStop(f.get("stop")); e != nil {
		return nil, e
	}
	return r, nil
}

// promptShape accepts string | []string | []int | [][]int and returns the
// number of inputs and their estimate bytes. nonEmpty refuses empty strings
// (embeddings of "" are meaningless and OpenAI rejects them).
func promptShape(raw json.RawMessage, param string, nonEmpty bool) (count, size int, e *Error) {
	const expected = "a string, an array of strings, an array of integers or an array of integer arrays"
	if s, ok := asString(raw); ok {
		if nonEmpty && s == "" {
			return 0, 0, invalidValue(param, "expected a non-empty string.")
		}
		return 1, len(s), nil
	}
	arr, ok := asArray(raw)
	if !ok {
		return 0, 0, typeError(param, expected, raw)
	}
	if len(arr) == 0 {
		return 0, 0, invalidValue(param, "expected a non-empty array.")
	}
	if n, ok := asIntArray(raw); ok {
		return 1, n * tokenBytes, nil
	}
	for i, el := range arr {
		ep := fmt.Sprintf("%s[%d]", param, i)
		if s, ok := asString(el); ok {
			if nonEmpty && s == "" {
				return 0, 0, invalidValue(ep, "expected a non-empty string.")
			}
			size += len(s)
			continue
		}
		n, ok := asIntArray(el)
		if !ok {
			return 0, 0, typeError(ep, "a string or an array of integers", el)
		}
		if nonEmpty && n == 0 {
			return 0, 0, invalidValue(ep, "expected a non-empty array.")
		}
		size += n * tokenBytes
	}
	return len(arr), size, nil
}

// Embedding encoding formats.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64"
)

// EmbeddingRequest is a validated POST /v1/embeddings body.
type EmbeddingRequest struct {
	Model string
	// EncodingFormat is "float" (also when absent) or "base64".
	EncodingFormat string
	// InputCount is the number of inputs, i.e. of vectors the response holds.
	InputCount  int
	PromptBytes int
	Raw         []byte
}

// EstimatePromptTokens estimates the input size with EstimateTokens.
func (r *EmbeddingRequest) EstimatePromptTokens() int {
	return EstimateTokens(r.PromptBytes, 0)
}

// RunSupported is nil: a run serves any number of inputs. (Token arrays,
// which only a tunnel carries, are refused by RunInput.)
func (r *EmbeddingRequest) RunSupported() error { return nil }

// ParseEmbedding validates an embeddings body: model, input (a non-empty
// string, array of strings, token array or array of token arrays; at most
// MaxEmbeddingInputs), encoding_format (float | base64) and dimensions. On
// failure it returns an *Error 400.
func ParseEmbedding(body []byte) (*EmbeddingRequest, error) {
	r, e := parseEmbedding(body)
	if e != nil {
		return nil, e
	}
	return r, nil
}

func parseEmbedding(body []byte) (*EmbeddingRequest, *Error) {
	var f fields
	if e := readTop(body, embeddingMembers, &f); e != nil {
		return nil, e
	}
	r := &EmbeddingRequest{Raw: body, EncodingFormat: EncodingFloat}
	var e *Error
	if r.Model, e = requiredString(f.get("model"), "model"); e != nil {
		return nil, e
	}
	raw := f.get("input")
	if raw == nil || isNull(raw) {
		return nil, missingParam("input")
	}
	if r.InputCount, r.PromptBytes, e = promptShape(raw, "input", true); e != nil {
		return nil, e
	}
	if r.InputCount > MaxEmbeddingInputs {
		return nil, invalidValue("input", fmt.Sprintf("expected at most %d inputs, but got %d.", MaxEmbeddingInputs, r.InputCount))
	}
	format, has, e := optString(f.get("encoding_format"), "encoding_format")
	if e != nil {
		return nil, e
	}
	if has {
		if format != EncodingFloat && format != EncodingBase64 {
			return nil, invalidValue("encoding_format", fmt.Sprintf("expected 'float' or 'base64', but got %s.", quoteValue(format)))
		}
		r.EncodingFormat = format
	}
	if _, _, e := optInt(f.get("dimensions"), "dimensions", 1, 1<<20); e != nil {
		return nil, e
	}
	if _, _, e := optString(f.get("user"), "user"); e != nil {
		return nil, e
	}
	return r, nil
}

// ResponsesRequest is a validated POST /v1/responses body. The endpoint is a
// tunnel passthrough, so only what routing needs is examined.
type ResponsesRequest struct {
	Model  string
	Stream bool
	// PreviousResponseID is the response this one follows ("": none):
	// the edge sends it to the provider that answered that one.
	PreviousResponseID string
	Raw                []byte
}

// ParseResponses validates a responses body: a JSON object with a string
// model, an optional boolean stream and an optional string
// previous_response_id. On failure it returns an *Error 400.
func ParseResponses(body []byte) (*ResponsesRequest, error) {
	var f fields
	if e := readTop(body, responsesMembers, &f); e != nil {
		return nil, e
	}
	r := &ResponsesRequest{Raw: body}
	var e *Error
	if r.Model, e = requiredString(f.get("model"), "model"); e != nil {
		return nil, e
	}
	if r.Stream, e = optBool(f.get("stream"), "stream"); e != nil {
		return nil, e
	}
	if r.PreviousResponseID, _, e = optString(f.get("previous_response_id"), "previous_response_id"); e != nil {
		return nil, e
	}
	return r, nil
}
