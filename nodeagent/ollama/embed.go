package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// maxWholeResponse is adapter.MaxWholeResponse, the bound of an embed
// answer: a variable only for tests, which refuse at a small bound rather
// than read 32 MiB.
var maxWholeResponse = adapter.MaxWholeResponse

// ollamaEmbed is the body of POST /api/embed.
type ollamaEmbed struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions *int64          `json:"dimensions,omitempty"`
	Options    map[string]any  `json:"options,omitempty"`
	KeepAlive  json.RawMessage `json:"keep_alive,omitempty"`
	// Truncate is sent always: Ollama's default (true) embeds the head of
	// an input longer than the model's context and says nothing, so a RAG
	// chunk would be indexed by a vector of its first part. With false it
	// answers 400 "the input length exceeds the context length", as
	// OpenAI's embeddings endpoint and vLLM's refuse an over-long input.
	// The caller's own truncate member (extra) wins.
	Truncate bool `json:"truncate"`
}

type ollamaEmbedResponse struct {
	Embeddings      json.RawMessage `json:"embeddings"`
	PromptEvalCount *int64          `json:"prompt_eval_count"`
}

// buildEmbed translates an embeddings input (texts only).
func buildEmbed(in *iop.RunInput, model string, cfg *config) (*ollamaEmbed, int, error) {
	texts := in.GetEmbedInputs()
	if len(texts) == 0 {
		return nil, 0, fmt.Errorf("%w: input must not be empty", errBadInput)
	}
	var extra embedExtra
	if err := decodeExtra(in, &extra, "truncate must be a boolean"); err != nil {
		return nil, 0, err
	}
	raw, err := json.Marshal(texts)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: input: %w", errBadInput, err)
	}
	opts := cfg.defaultOptions()
	if len(opts) == 0 {
		opts = nil
	}
	return &ollamaEmbed{
		Model:      model,
		Input:      raw,
		Dimensions: in.Dimensions,
		Options:    opts,
		KeepAlive:  cfg.keepAlive,
		Truncate:   extra.Truncate != nil && *extra.Truncate,
	}, len(texts), nil
}

// runEmbed calls /api/embed; Result.Output is the embeddings array as
// Ollama encoded it (compacted), one vector per input.
func (o *Instance) runEmbed(ctx context.Context, cfg *config, req *iop.RunRequest) (*adapter.Result, error) {
	body, n, err := buildEmbed(req.GetInput(), req.GetTarget(), cfg)
	if err != nil {
		return nil, err
	}
	resp, err := o.post(ctx, cfg, "/api/embed", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxWholeResponse)+1))
	if err != nil {
		// Ollama dropped the connection mid-answer: its failure, which
		// another candidate may serve (a cancellation or the run's timeout
		// is mapped by Run before this error is looked at).
		return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama embed response was interrupted", Err: err}
	}
	if len(raw) > maxWholeResponse {
		return nil, adapter.EmbeddingsTooLarge()
	}
	var er ollamaEmbedResponse
	if err := json.Unmarshal(raw, &er); err != nil {
		return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama sent a malformed embed response", Err: err}
	}
	// Validate the shape without re-encoding the numbers, so the output
	// keeps Ollama's float formatting exactly.
	var vectors [][]float64
	if err := json.Unmarshal(er.Embeddings, &vectors); err != nil {
		return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "ollama sent malformed embeddings", Err: err}
	}
	if len(vectors) != n {
		return nil, &adapter.Error{
			Code:    adapter.CodeUpstream,
			Message: fmt.Sprintf("ollama returned %d embeddings for %d inputs", len(vectors), n),
			Err:     errors.New("ollama: embedding count mismatch"),
		}
	}
	var out bytes.Buffer
	if err := json.Compact(&out, er.Embeddings); err != nil {
		return nil, fmt.Errorf("ollama: compact embeddings: %w", err)
	}
	res := &adapter.Result{FinishReason: "stop", Output: out.Bytes()}
	if er.PromptEvalCount != nil {
		p := max(*er.PromptEvalCount, 0)
		res.Usage = &iop.Usage{PromptTokens: p, TotalTokens: p}
	}
	return res, nil
}
