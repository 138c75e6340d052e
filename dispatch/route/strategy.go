package route

import (
	"errors"
	"fmt"
	"math"
)

// Strategy is a model's routing policy (config models[].routing).
type Strategy uint8

const (
	// Ordered takes the first fitting candidate in configured order.
	Ordered Strategy = iota
	// LeastLoad takes the fitting candidate with the lowest Score.
	LeastLoad
	// PrefixAffinity takes the fitting candidate with the longest matched
	// prompt prefix unless it is overloaded; see the package doc.
	PrefixAffinity
)

// ErrUnknownStrategy is returned by ParseStrategy for a name it does not
// know.
var ErrUnknownStrategy = errors.New("unknown routing strategy")

// ParseStrategy reads a config value: "ordered" (also ""), "least_load" or
// "prefix_affinity".
func ParseStrategy(s string) (Strategy, error) {
	switch s {
	case "", "ordered":
		return Ordered, nil
	case "least_load":
		return LeastLoad, nil
	case "prefix_affinity":
		return PrefixAffinity, nil
	}
	return Ordered, fmt.Errorf("route: %w %q (want ordered, least_load or prefix_affinity)", ErrUnknownStrategy, s)
}

// String returns the config name of s.
func (s Strategy) String() string {
	switch s {
	case Ordered:
		return "ordered"
	case LeastLoad:
		return "least_load"
	case PrefixAffinity:
		return "prefix_affinity"
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// Load is what a candidate's backend last reported.
type Load struct {
	// Known is false when there is no report, or the latest is stale:
	// the other fields are then ignored.
	Known bool
	// Running and Waiting are the backend's requests being decoded and
	// queued (vLLM num_requests_running / num_requests_waiting).
	Running, Waiting float64
	// KVUsage is the fraction of the backend's KV cache in use, 0..1.
	KVUsage float64
}

// Candidate is one fitting (node, provider) as the caller sees it now.
type Candidate struct {
	// InFlight is the edge's leases on the candidate; Capacity its
	// configured lease capacity.
	InFlight, Capacity int
	Load               Load
}

// Score weights, explained in the package doc.
const (
	waitWeight = 2.0
	kvWeight   = 0.25
	kvKnee     = 0.8
	kvSteep    = 4.0
)

// Score is c's load for least_load and the balance check of
// prefix_affinity: lower is better. The formula and its reasons are in the
// package doc. It is finite and non-negative for any input.
func Score(c Candidate) float64 {
	capacity := float64(max(c.Capacity, 1))
	inFlight := float64(max(c.InFlight, 0))
	if !c.Load.Known {
		return inFlight / capacity
	}
	running := sane(c.Load.Running)
	waiting := sane(c.Load.Waiting)
	kv := min(sane(c.Load.KVUsage), 1)
	return max(inFlight, running)/capacity + waitWeight*waiting/capacity + kvWeight*kv + kvSteep*max(0, kv-kvKnee)
}

// sane maps NaN and negatives to 0 and +Inf to the largest finite float,
// so a garbled report cannot make comparisons meaningless.
func sane(v float64) float64 {
	if !(v > 0) { // NaN too
		return 0
	}
	// Large enough that it dominates, small enough that sums stay finite.
	return min(v, math.MaxFloat64/16)
}

// Options tunes prefix_affinity. A field at or below zero (the zero
// Options) takes its default; to keep affinity whatever the load, set both
// to math.Inf(1).
type Options struct {
	// BalanceAbs: affinity yields to the least loaded candidate only when
	// its Score exceeds that one's by more than this (default 0.5).
	BalanceAbs float64
	// BalanceRel: ... and is more than this many times it (default 1.5).
	BalanceRel float64
}

const (
	defaultBalanceAbs = 0.5
	defaultBalanceRel = 1.5
)

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{BalanceAbs: defaultBalanceAbs, BalanceRel: defaultBalanceRel}
}

func (o Options) withDefaults() Options {
	if !(o.BalanceAbs > 0) {
		o.BalanceAbs = defaultBalanceAbs
	}
	if !(o.BalanceRel > 0) {
		o.BalanceRel = defaultBalanceRel
	}
	return o
}

// Pick returns the index in cands of the candidate to serve the request, or
// -1 when cands is empty. cands are the fitting candidates in configured
// order; match[i] is how many prompt blocks candidate i served last
// (Prefixes.Longest), read only by PrefixAffinity (missing or negative
// entries count as 0; nil is fine). An unknown strategy behaves as Ordered.
// Pick does not allocate.
func Pick(s Strategy, cands []Candidate, match []int, opts Options) int {
	if len(cands) == 0 {
		return -1
	}
	switch s {
	case LeastLoad:
		return leastLoaded(cands)
	case PrefixAffinity:
		return affine(cands, match, opts.withDefaults())
	}
	return 0
}

func leastLoaded(cands []Candidate) int {
	best, bestScore := 0, Score(cands[0])
	for i := 1; i < len(cands); i++ {
		if sc := Score(cands[i]); sc < bestScore {
			best, bestScore = i, sc
		}
	}
	return best
}

// affine is PrefixAffinity: one pass finds both the least loaded candidate
// and the longest match (ties by lower Score, then order).
func affine(cands []Candidate, match []int, o Options) int {
	least, leastScore := -1, 0.0
	aff, affScore, affLen := -1, 0.0, 0
	for i := range cands {
		sc := Score(cands[i])
		if least < 0 || sc < leastScore {
			least, leastScore = i, sc
		}
		m := 0
		if i < len(match) {
			m = match[i]
		}
		if m > 0 && (m > affLen || (m == affLen && sc < affScore)) {
			aff, affScore, affLen = i, sc, m
		}
	}
	if aff < 0 {
		return least
	}
	if affScore-leastScore > o.BalanceAbs && affScore > leastScore*o.BalanceRel {
		return least
	}
	return aff
}
