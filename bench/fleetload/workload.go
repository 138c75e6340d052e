// Package fleetload drives a multi-turn chat workload with shared system
// prompts against an OpenAI-compatible endpoint (a gateway) or directly,
// round robin, against a set of backends (what an nginx round-robin
// upstream would do), and reports TTFT, end-to-end latency and output
// throughput. With bench/vllmsim backends it shows what prefix-aware and
// load-aware routing buy over round robin; ScrapeHitRate reads the
// backends' prefix cache counters.
//
// The workload: each conversation picks one of SystemPrompts system prompts
// with Zipf popularity (a few hot prefixes), then sends Turns streamed
// requests in sequence; each turn carries the system prompt, all earlier
// user turns and the answers received, so prefixes grow turn by turn.
// Conversations run Concurrency at a time (closed loop). Text is made of
// random lowercase words of 2-4 letters: one token each in vllmsim's
// tokenizer (1-2 in a real BPE one), so "tokens" in Workload are vllmsim
// tokens.
//
// The generator is cheap (token chunks are read without a full JSON
// decode), but every token is still an SSE event over loopback: on a 2-core
// machine the whole path (simulators plus generator) carries roughly 100k
// events/s. Pick vllmsim's TimeScale so the fleet stays well below that,
// and check that each simulator's Stats().SimBusy × TimeScale approaches
// the run's wall time only when the simulated fleet, not the machine, is
// saturated.
package fleetload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// ErrWorkload reports an invalid Workload.
var ErrWorkload = errors.New("fleetload: invalid workload")

// Workload describes the traffic. Zero fields take the defaults noted.
type Workload struct {
	Conversations int     // conversations in the run (default 64)
	Turns         int     // requests per conversation (default 4)
	SystemPrompts int     // K distinct system prompts (default 4)
	SystemTokens  int     // ~tokens per system prompt (default 512)
	ZipfS         float64 // popularity skew, > 1: prompt k is picked with P ∝ (1+k)^-ZipfS (default 1.2)
	UserTokensMin int     // user turn length, uniform in [min, max] tokens (default 16)
	UserTokensMax int     // (default 64)
	MaxTokens     int     // max_tokens of each request (default 64)
	Concurrency   int     // conversations in flight (default 16)
	Seed          uint64  // makes prompts, turns and popularity draws reproducible
	Model         string  // the request's model (default empty: vllmsim accepts it)
	// RequestTimeout bounds one request (default 2 minutes).
	RequestTimeout time.Duration
}

// Defaults.
const (
	DefaultConversations  = 64
	DefaultTurns          = 4
	DefaultSystemPrompts  = 4
	DefaultSystemTokens   = 512
	DefaultZipfS          = 1.2
	DefaultUserTokensMin  = 16
	DefaultUserTokensMax  = 64
	DefaultMaxTokens      = 64
	DefaultConcurrency    = 16
	DefaultRequestTimeout = 2 * time.Minute
)

// withDefaults fills zero fields and rejects the rest of nonsense.
func (w Workload) withDefaults() (Workload, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&w.Conversations, DefaultConversations)
	def(&w.Turns, DefaultTurns)
	def(&w.SystemPrompts, DefaultSystemPrompts)
	def(&w.SystemTokens, DefaultSystemTokens)
	def(&w.UserTokensMin, DefaultUserTokensMin)
	def(&w.UserTokensMax, DefaultUserTokensMax)
	def(&w.MaxTokens, DefaultMaxTokens)
	def(&w.Concurrency, DefaultConcurrency)
	if w.ZipfS == 0 {
		w.ZipfS = DefaultZipfS
	}
	if w.RequestTimeout == 0 {
		w.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case w.Conversations < 0, w.Turns < 0, w.SystemPrompts < 0, w.SystemTokens < 0, w.MaxTokens < 0, w.Concurrency < 0:
		return w, fmt.Errorf("%w: negative count", ErrWorkload)
	case w.UserTokensMin < 1 || w.UserTokensMax < w.UserTokensMin:
		return w, fmt.Errorf("%w: user tokens %d..%d", ErrWorkload, w.UserTokensMin, w.UserTokensMax)
	case w.ZipfS <= 1:
		return w, fmt.Errorf("%w: zipf s %v must be > 1", ErrWorkload, w.ZipfS)
	case w.RequestTimeout < 0:
		return w, fmt.Errorf("%w: negative request timeout", ErrWorkload)
	}
	return w, nil
}

// vocabSize words of 2-4 lowercase letters make all text.
const vocabSize = 4096

// gen holds what all conversations share; read-only once built.
type gen struct {
	w       Workload
	vocab   []string
	systems []string
}

func newGen(w Workload) *gen {
	r := rand.New(rand.NewPCG(w.Seed, 0x5eed))
	g := &gen{w: w, vocab: make([]string, vocabSize)}
	var b [4]byte
	for i := range g.vocab {
		n := 2 + r.IntN(3)
		for j := range n {
			b[j] = byte('a' + r.IntN(26))
		}
		g.vocab[i] = string(b[:n])
	}
	for k := range w.SystemPrompts {
		// A distinct first word keeps prompts apart from their first block.
		g.systems = append(g.systems, fmt.Sprintf("s%03d ", k)+g.words(r, w.SystemTokens-1))
	}
	return g
}

func (g *gen) words(r *rand.Rand, n int) string {
	var sb strings.Builder
	sb.Grow(n * 4)
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(g.vocab[r.IntN(len(g.vocab))])
	}
	return sb.String()
}

// conversation draws conversation i's system prompt and its rng; both
// depend only on the seed and i, not on scheduling.
func (g *gen) conversation(i int) (system int, r *rand.Rand) {
	r = rand.New(rand.NewPCG(g.w.Seed, uint64(i)+1))
	z := rand.NewZipf(r, g.w.ZipfS, 1, uint64(g.w.SystemPrompts-1))
	return int(z.Uint64()), r
}

// userTurn draws one user message.
func (g *gen) userTurn(r *rand.Rand) string {
	n := g.w.UserTokensMin + r.IntN(g.w.UserTokensMax-g.w.UserTokensMin+1)
	return g.words(r, n)
}
