package route

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// anyFloat draws report figures as a buggy or hostile node might send
// them: ordinary values, and now and then NaN, infinities or negatives.
func anyFloat(name string) *rapid.Generator[float64] {
	return rapid.Custom(func(t *rapid.T) float64 {
		switch rapid.IntRange(0, 9).Draw(t, name+"_kind") {
		case 0:
			return rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, math.MaxFloat64}).Draw(t, name+"_odd")
		case 1, 2:
			return 0
		}
		return rapid.Float64Range(0, 64).Draw(t, name)
	})
}

func genLoad(t *rapid.T) Load {
	return Load{
		Known:   rapid.Bool().Draw(t, "known"),
		Running: anyFloat("running").Draw(t, "r"),
		Waiting: anyFloat("waiting").Draw(t, "w"),
		KVUsage: anyFloat("kv").Draw(t, "kv"),
	}
}

// genFitting draws a candidate with a free slot, as the pool passes them;
// often one of a few fixed ones, so equal scores (ties) are common.
func genFitting(t *rapid.T) Candidate {
	if rapid.Bool().Draw(t, "common") {
		return rapid.SampledFrom([]Candidate{
			{InFlight: 0, Capacity: 4},
			{InFlight: 2, Capacity: 4},
			{InFlight: 1, Capacity: 2, Load: Load{Known: true}},
			{InFlight: 0, Capacity: 4, Load: Load{Known: true, Waiting: 2}},
		}).Draw(t, "cand")
	}
	capacity := rapid.IntRange(1, 16).Draw(t, "cap")
	return Candidate{InFlight: rapid.IntRange(0, capacity-1).Draw(t, "inflight"), Capacity: capacity, Load: genLoad(t)}
}

func genOptions(t *rapid.T) Options {
	return Options{
		BalanceAbs: rapid.SampledFrom([]float64{0, -1, 0.1, 0.5, 2, math.Inf(1), math.NaN()}).Draw(t, "abs"),
		BalanceRel: rapid.SampledFrom([]float64{0, -1, 1, 1.0001, 1.5, 3, math.Inf(1), math.NaN()}).Draw(t, "rel"),
	}
}

// refPick is Pick restated from its documentation, pass by pass.
func refPick(s Strategy, cands []Candidate, match []int, opts Options) int {
	if len(cands) == 0 {
		return -1
	}
	least := func() int {
		lo := math.Inf(1)
		for _, c := range cands {
			lo = math.Min(lo, Score(c))
		}
		for i, c := range cands {
			if Score(c) == lo {
				return i
			}
		}
		panic("no minimum")
	}
	switch s {
	case LeastLoad:
		return least()
	case PrefixAffinity:
		m := func(i int) int {
			if i < len(match) && match[i] > 0 {
				return match[i]
			}
			return 0
		}
		longest := 0
		for i := range cands {
			longest = max(longest, m(i))
		}
		if longest == 0 {
			return least()
		}
		aff := -1
		for i := range cands {
			if m(i) == longest && (aff < 0 || Score(cands[i]) < Score(cands[aff])) {
				aff = i
			}
		}
		abs, rel := opts.BalanceAbs, opts.BalanceRel
		if math.IsNaN(abs) || abs <= 0 {
			abs = DefaultOptions().BalanceAbs
		}
		if math.IsNaN(rel) || rel <= 0 {
			rel = DefaultOptions().BalanceRel
		}
		l := least()
		if sa, sl := Score(cands[aff]), Score(cands[l]); sa-sl > abs && sa > sl*rel {
			return l
		}
		return aff
	}
	return 0
}

// TestPickProperties: whatever the strategy, loads and matches, Pick names
// one of the candidates it was given (so a caller passing only fitting ones
// never overfills a provider), agrees with the documented rule, and is
// deterministic.
func TestPickProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := Strategy(rapid.IntRange(0, 4).Draw(t, "strategy"))
		cands := rapid.SliceOfN(rapid.Custom(genFitting), 0, 9).Draw(t, "cands")
		match := rapid.SliceOfN(rapid.IntRange(-2, 3), 0, 10).Draw(t, "match")
		opts := genOptions(t)
		got := Pick(s, cands, match, opts)
		if len(cands) == 0 {
			if got != -1 {
				t.Fatalf("Pick of no candidates = %d; want -1", got)
			}
			return
		}
		if got < 0 || got >= len(cands) {
			t.Fatalf("Pick = %d, outside the %d candidates given", got, len(cands))
		}
		if c := cands[got]; c.InFlight >= c.Capacity {
			t.Fatalf("picked a full candidate %+v", c)
		}
		if want := refPick(s, cands, match, opts); got != want {
			t.Fatalf("Pick(%v) = %d; the documented rule gives %d", s, got, want)
		}
		if again := Pick(s, cands, match, opts); again != got {
			t.Fatalf("Pick is not deterministic: %d then %d", got, again)
		}
	})
}

// TestScoreProperties: finite, non-negative, occupancy alone without a
// report, and never lower for more leases, more waiting or fuller cache.
func TestScoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := Candidate{InFlight: rapid.IntRange(-2, 40).Draw(t, "inflight"), Capacity: rapid.IntRange(-1, 32).Draw(t, "cap"), Load: genLoad(t)}
		s := Score(c)
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			t.Fatalf("Score(%+v) = %v", c, s)
		}
		if !c.Load.Known {
			if want := float64(max(c.InFlight, 0)) / float64(max(c.Capacity, 1)); s != want {
				t.Fatalf("unknown load: Score = %v; want occupancy %v", s, want)
			}
		}
		more := c
		switch rapid.IntRange(0, 2).Draw(t, "grow") {
		case 0:
			more.InFlight += rapid.IntRange(1, 8).Draw(t, "d")
		case 1:
			more.Load.Waiting = math.Max(sane(c.Load.Waiting), 0) + rapid.Float64Range(0.5, 8).Draw(t, "d")
		case 2:
			more.Load.KVUsage = math.Max(sane(c.Load.KVUsage), 0) + rapid.Float64Range(0.01, 1).Draw(t, "d")
		}
		if Score(more) < s {
			t.Fatalf("more load scored lower: %+v -> %v, %+v -> %v", c, s, more, Score(more))
		}
	})
}
