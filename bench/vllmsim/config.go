// Package vllmsim is an in-process simulated vLLM OpenAI-compatible server
// for routing benchmarks. Unlike bench/mockup (fixed answers, fixed pacing)
// it models what makes LLM-aware routing matter: continuous batching, a
// paged KV cache with automatic prefix caching, a bounded running set with
// an FCFS waiting queue, and step times that grow with the batch. Several
// simulators behind a router show whether the router keeps hot prefixes on
// the backend that already holds them and spreads load by queue depth.
//
// # Model
//
// A scheduler goroutine advances in steps, following the vLLM V1 scheduler:
//
//   - Tokens: the request's messages are rendered with a fixed template
//     (<|role|> content <|end|> per message, then <|assistant|>). Content is
//     split at whitespace, each word into pieces of at most 4 bytes, and each
//     piece hashed (FNV-1a 32) to a token id. So a word of up to 4 bytes is
//     one token and English text gives roughly one token per 4 bytes, close
//     to real BPE counts. Generated tokens are words of at most 4 bytes from a
//     fixed list, so an answer sent back in the next turn tokenizes to the
//     same ids and its KV blocks can be reused, as with vLLM.
//   - KV cache: NumBlocks blocks of BlockSize tokens. A full block's hash is
//     FNV-1a 64 of (parent block hash, token ids), vLLM's chained block hash
//     for automatic prefix caching. A block is registered once all its tokens
//     are computed. Freed blocks keep their hash in an LRU evictable pool
//     (freed in reverse order, so a sequence's tail is evicted first) and are
//     reused by a later hit; allocation takes the least recently freed block,
//     dropping its hash. Free blocks without a hash are used first.
//   - Admission: at most MaxNumSeqs running sequences; the rest wait FCFS. The
//     head of the queue is admitted only if the blocks of its uncached prompt
//     fit beside the cached prefix it reuses; otherwise it and everything
//     behind it wait (head-of-line, as vLLM). At least the last prompt token
//     is always computed (vLLM caps a full hit one token short).
//   - Each step schedules running sequences first (one token each when
//     decoding, a prefill chunk otherwise), then admits waiting ones, within
//     MaxBatchedTokens tokens (chunked prefill). A decoding sequence that needs
//     a new block and finds none preempts the most recently admitted running
//     sequence (recompute: its blocks are freed, it goes back to the head of
//     the queue), as vLLM V1 does.
//   - Step time = DecodeBase + DecodePerSeq × scheduled sequences +
//     PrefillPerToken × prefill tokens, multiplied by TimeScale. At the end
//     of the step each sequence whose tokens are all computed emits one
//     token. A sequence finishes after max_tokens tokens (finish_reason
//     "length"; the simulator never samples an end-of-sequence token).
//
// # Endpoints
//
// POST /v1/chat/completions (stream and non-stream, vLLM's framing), GET
// /v1/models, GET /health, GET /metrics (Prometheus text with vLLM's metric
// names and the model_name label). A client that goes away aborts its
// sequence and frees its blocks.
package vllmsim

import "time"

// Config sets the simulated engine. Zero fields take the defaults below (a
// negative DecodePerSeq or PrefillPerToken means no such cost);
// sources: vLLM engine arguments (docs.vllm.ai "Engine Arguments" and
// vllm/engine/arg_utils.py get_batch_defaults) where a default exists, and
// otherwise a plausible figure set for a 7B model (Llama-2-7B shape) in fp16
// on one A100-80GB. The timing figures are assumptions, not measurements;
// change them to match a real deployment.
type Config struct {
	// Model is the served model name (vLLM --served-model-name). A request
	// naming another model gets 404 like vLLM; an empty model is accepted.
	// Default "sim-model".
	Model string
	// BlockSize is the KV block size in tokens (vLLM --block-size, default
	// 16 on CUDA).
	BlockSize int
	// NumBlocks is the number of KV blocks. Default 6800: an estimate for a
	// 7B fp16 model on A100-80GB at gpu_memory_utilization 0.9: 72 GB minus
	// ~13.5 GB weights and ~4 GB activations/graphs leaves ~55 GB; a Llama-2-7B
	// token takes 2 (K,V) × 32 layers × 4096 × 2 bytes = 512 KiB, so ~108k
	// tokens = ~6800 blocks. Benchmarks that want eviction use far fewer.
	NumBlocks int
	// MaxNumSeqs bounds the running sequences (vLLM --max-num-seqs, default
	// 256 for the OpenAI server on A100 and GPUs under 70 GiB).
	MaxNumSeqs int
	// MaxBatchedTokens is the token budget of one step (vLLM
	// --max-num-batched-tokens with chunked prefill; the V1 default for the
	// OpenAI server on A100 is 2048).
	MaxBatchedTokens int
	// MaxModelLen bounds prompt + max_tokens (vLLM --max-model-len; default
	// 4096, Llama-2's context). Longer requests get 400. It is lowered to the
	// KV capacity if that is smaller, as vLLM refuses to start otherwise.
	MaxModelLen int
	// DefaultMaxTokens is the output length when a request sets neither
	// max_tokens nor max_completion_tokens. vLLM would generate up to
	// MaxModelLen or an end-of-sequence token; the simulator has no EOS, so
	// it uses this (default 256, an assumption for chat answers).
	DefaultMaxTokens int
	// MaxWaiting bounds the waiting queue; a request beyond it gets 429.
	// vLLM has no such bound (the queue grows); it keeps a benchmark from
	// piling up unbounded work. Default 4096.
	MaxWaiting int
	// DecodeBase is the fixed time of a step (forward pass over the weights,
	// sampling, scheduling). Assumption: 12 ms, between the ~7 ms a 7B fp16
	// model needs to stream 13.5 GB at A100's ~2 TB/s and the 15-25 ms
	// time-per-output-token vLLM benchmarks report for 7-8B models at low
	// concurrency.
	DecodeBase time.Duration
	// DecodePerSeq is the added time per sequence in the step (attention over
	// its KV, bigger GEMMs). Assumption: 100 µs, so a batch of 256 runs a
	// ~38 ms step, in line with reported TPOT at high concurrency.
	DecodePerSeq time.Duration
	// PrefillPerToken is the time per uncached prompt token computed.
	// Assumption: 100 µs (7B ≈ 14 GFLOP per token; A100 312 TFLOP/s bf16 at
	// ~45% utilization), within the 0.1-0.3 ms/token usually quoted.
	PrefillPerToken time.Duration
	// TimeScale multiplies every simulated duration when sleeping: 0.01 runs
	// a benchmark 100× faster than the modelled GPU. Stats and metrics report
	// simulated time unscaled. Default 1.
	TimeScale float64
}

// Defaults; see Config for their sources.
const (
	DefaultModel            = "sim-model"
	DefaultBlockSize        = 16
	DefaultNumBlocks        = 6800
	DefaultMaxNumSeqs       = 256
	DefaultMaxBatchedTokens = 2048
	DefaultMaxModelLen      = 4096
	DefaultOutputTokens     = 256
	DefaultMaxWaiting       = 4096
	DefaultDecodeBase       = 12 * time.Millisecond
	DefaultDecodePerSeq     = 100 * time.Microsecond
	DefaultPrefillPerToken  = 100 * time.Microsecond
)

// withDefaults fills zero (and nonsensical negative) fields.
func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.BlockSize <= 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.NumBlocks <= 0 {
		c.NumBlocks = DefaultNumBlocks
	}
	if c.MaxNumSeqs <= 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.MaxBatchedTokens <= 0 {
		c.MaxBatchedTokens = DefaultMaxBatchedTokens
	}
	if c.MaxModelLen <= 0 {
		c.MaxModelLen = DefaultMaxModelLen
	}
	c.MaxModelLen = min(c.MaxModelLen, c.NumBlocks*c.BlockSize)
	if c.DefaultMaxTokens <= 0 {
		c.DefaultMaxTokens = DefaultOutputTokens
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.DecodeBase <= 0 {
		c.DecodeBase = DefaultDecodeBase
	}
	if c.DecodePerSeq < 0 {
		c.DecodePerSeq = 0
	} else if c.DecodePerSeq == 0 {
		c.DecodePerSeq = DefaultDecodePerSeq
	}
	if c.PrefillPerToken < 0 {
		c.PrefillPerToken = 0
	} else if c.PrefillPerToken == 0 {
		c.PrefillPerToken = DefaultPrefillPerToken
	}
	if c.TimeScale <= 0 {
		c.TimeScale = 1
	}
	return c
}
