package openaiapi

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// EmbeddingOptions configure the rendering of an embedding run.
type EmbeddingOptions struct {
	// Model is the external model name echoed in the response.
	Model string
	// EncodingFormat is EncodingFloat (also when empty) or EncodingBase64.
	EncodingFormat string
	// InputCount, when > 0, is the number of vectors the run must return;
	// a different count is an upstream error rather than a silently
	// misaligned response.
	InputCount int
	// PromptTokens is reported as usage when the run reports none.
	PromptTokens int
}

// RenderOptions returns the embedding rendering options for this request.
func (r *EmbeddingRequest) RenderOptions() EmbeddingOptions {
	return EmbeddingOptions{
		Model:          r.Model,
		EncodingFormat: r.EncodingFormat,
		InputCount:     r.InputCount,
		PromptTokens:   r.EstimatePromptTokens(),
	}
}

type embeddingList struct {
	Object string          `json:"object"`
	Data   []embeddingItem `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

type embeddingItem struct {
	Object    string          `json:"object"`
	Index     int             `json:"index"`
	Embedding json.RawMessage `json:"embedding"` // array of numbers, or a base64 string
}

type embeddingUsage struct {
	PromptTokens int64 `json:"prompt_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// EmbeddingAggregator renders an embedding run (never streamed) from its
// COMPLETE event's output. Not safe for concurrent use.
type EmbeddingAggregator struct {
	opts     EmbeddingOptions
	st       runState
	rendered bool
	body     []byte
	err      *Error
	usage    Usage
	reported bool
}

// NewEmbeddingAggregator starts the rendering of one run.
func NewEmbeddingAggregator(opts EmbeddingOptions) *EmbeddingAggregator {
	return &EmbeddingAggregator{opts: opts}
}

// Add consumes one event and reports whether it was the terminal one.
func (a *EmbeddingAggregator) Add(ev *iop.RunEvent) (done bool) {
	if ev == nil || a.st.done() {
		return a.st.done()
	}
	return a.st.observe(ev)
}

// Done reports whether the terminal event has been seen.
func (a *EmbeddingAggregator) Done() bool { return a.st.done() }

// Result returns the embeddings list JSON or the *Error to answer with.
func (a *EmbeddingAggregator) Result() ([]byte, *Error) {
	if a.rendered {
		return a.body, a.err
	}
	a.rendered = true
	a.usage, a.reported = a.st.finalUsage(a.opts.PromptTokens, 0)
	if a.err = a.st.failure(); a.err != nil {
		return nil, a.err
	}
	a.body, a.err = RenderEmbeddings(a.opts, a.st.output, a.st.usage)
	return a.body, a.err
}

// Abandoned is false: embeddings arrive whole, in the terminal event,
// within one wire frame.
func (a *EmbeddingAggregator) Abandoned() bool { return false }

// Usage returns the usage (valid after Result) and whether it was reported.
func (a *EmbeddingAggregator) Usage() (Usage, bool) { return a.usage, a.reported }

// RenderEmbeddings renders a run's embedding output (a JSON array of number
// arrays, one per input) as OpenAI's list. Float vectors are copied
// verbatim (compacted), so no precision is lost or invented; base64 encodes
// each vector as little-endian float32, exactly as OpenAI does. usage may be
// nil (the estimate in opts is reported). A malformed output is a 502.
func RenderEmbeddings(opts EmbeddingOptions, output []byte, usage *iop.Usage) ([]byte, *Error) {
	var vectors []json.RawMessage
	if err := json.Unmarshal(output, &vectors); err != nil || len(vectors) == 0 {
		return nil, UpstreamError("The provider returned no embeddings.")
	}
	if opts.InputCount > 0 && len(vectors) != opts.InputCount {
		return nil, UpstreamError(fmt.Sprintf("The provider returned %d embeddings for %d inputs.", len(vectors), opts.InputCount))
	}
	list := embeddingList{Object: "list", Data: make([]embeddingItem, len(vectors)), Model: opts.Model}
	for i, raw := range vectors {
		var floats []float64
		if err := json.Unmarshal(raw, &floats); err != nil || bytes.TrimSpace(raw)[0] != '[' {
			return nil, UpstreamError("The provider returned a malformed embedding.")
		}
		var enc json.RawMessage
		if opts.EncodingFormat == EncodingBase64 {
			enc = encodeString(base64Float32(floats))
		} else {
			var buf bytes.Buffer
			_ = json.Compact(&buf, raw) // raw was just decoded, so it is valid
			enc = buf.Bytes()
		}
		list.Data[i] = embeddingItem{Object: "embedding", Index: i, Embedding: enc}
	}
	if usage != nil {
		list.Usage.PromptTokens = usage.GetPromptTokens()
		list.Usage.TotalTokens = usage.GetTotalTokens()
	} else {
		list.Usage.PromptTokens = int64(opts.PromptTokens)
	}
	if list.Usage.TotalTokens == 0 {
		list.Usage.TotalTokens = list.Usage.PromptTokens
	}
	body, err := marshalCompact(list)
	if err != nil {
		return nil, InternalError("Rendering the response failed.")
	}
	return body, nil
}

// base64Float32 is OpenAI's encoding_format=base64: the vector as packed
// little-endian float32, standard base64 with padding.
func base64Float32(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}
