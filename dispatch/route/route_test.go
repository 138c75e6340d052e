package route

import (
	"errors"
	"math"
	"testing"
)

func TestParseStrategy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Strategy
	}{
		{"", Ordered}, {"ordered", Ordered}, {"least_load", LeastLoad}, {"prefix_affinity", PrefixAffinity},
	} {
		got, err := ParseStrategy(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, s := range []Strategy{Ordered, LeastLoad, PrefixAffinity} {
		if got, err := ParseStrategy(s.String()); err != nil || got != s {
			t.Errorf("round trip of %v: %v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"Ordered", "least-load", "random", " ordered"} {
		if _, err := ParseStrategy(bad); !errors.Is(err, ErrUnknownStrategy) {
			t.Errorf("ParseStrategy(%q) err = %v; want ErrUnknownStrategy", bad, err)
		}
	}
	if s := Strategy(9).String(); s != "strategy(9)" {
		t.Errorf("String of an unknown strategy = %q", s)
	}
}

func TestScore(t *testing.T) {
	known := func(run, wait, kv float64) Load { return Load{Known: true, Running: run, Waiting: wait, KVUsage: kv} }
	for _, tc := range []struct {
		name string
		c    Candidate
		want float64
	}{
		{"unknown is occupancy", Candidate{InFlight: 2, Capacity: 8, Load: Load{Running: 99, Waiting: 99, KVUsage: 1}}, 0.25},
		{"known idle equals unknown", Candidate{InFlight: 2, Capacity: 8, Load: known(0, 0, 0)}, 0.25},
		{"running above leases wins", Candidate{InFlight: 2, Capacity: 8, Load: known(6, 0, 0)}, 0.75},
		{"leases above running win", Candidate{InFlight: 4, Capacity: 8, Load: known(1, 0, 0)}, 0.5},
		{"waiting counts twice", Candidate{InFlight: 0, Capacity: 4, Load: known(0, 1, 0)}, 0.5},
		{"kv below knee is mild", Candidate{Capacity: 1, Load: known(0, 0, 0.8)}, 0.2},
		{"kv full is steep", Candidate{Capacity: 1, Load: known(0, 0, 1)}, 1.05},
		{"kv clamped", Candidate{Capacity: 1, Load: known(0, 0, 7)}, 1.05},
		{"garbage is zero", Candidate{InFlight: -3, Capacity: 0, Load: known(math.NaN(), -4, math.NaN())}, 0},
	} {
		if got := Score(tc.c); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Score = %v; want %v", tc.name, got, tc.want)
		}
	}
	if s := Score(Candidate{Capacity: 1, Load: known(math.Inf(1), math.Inf(1), math.Inf(1))}); math.IsInf(s, 0) || math.IsNaN(s) {
		t.Errorf("Score of infinite reports = %v; want finite", s)
	}
}

func TestPickExamples(t *testing.T) {
	idle := Candidate{InFlight: 0, Capacity: 8}
	busy := Candidate{InFlight: 7, Capacity: 8}
	half := Candidate{InFlight: 4, Capacity: 8}
	for _, tc := range []struct {
		name  string
		s     Strategy
		cands []Candidate
		match []int
		opts  Options
		want  int
	}{
		{"empty", LeastLoad, nil, nil, Options{}, -1},
		{"ordered takes the first", Ordered, []Candidate{busy, idle}, []int{0, 9}, Options{}, 0},
		{"unknown strategy is ordered", Strategy(200), []Candidate{busy, idle}, nil, Options{}, 0},
		{"least load", LeastLoad, []Candidate{busy, half, idle}, nil, Options{}, 2},
		{"least load ties by order", LeastLoad, []Candidate{half, idle, idle}, nil, Options{}, 1},
		{"least load sees the backend queue", LeastLoad, []Candidate{
			{InFlight: 0, Capacity: 8, Load: Load{Known: true, Waiting: 4}}, half}, nil, Options{}, 1},
		{"affinity without match is least load", PrefixAffinity, []Candidate{busy, idle}, []int{0, 0}, Options{}, 1},
		{"affinity with nil match is least load", PrefixAffinity, []Candidate{busy, idle}, nil, Options{}, 1},
		{"affinity takes the longest match", PrefixAffinity, []Candidate{idle, half, idle}, []int{1, 5, 3}, Options{}, 1},
		{"affinity ties by load", PrefixAffinity, []Candidate{half, idle}, []int{5, 5}, Options{}, 1},
		{"affinity equal match and load ties by order", PrefixAffinity, []Candidate{half, half, idle}, []int{5, 5, 0}, Options{}, 0},
		{"affinity holds at exactly rel", PrefixAffinity, []Candidate{
			{Capacity: 4, Load: Load{Known: true, Waiting: 3}}, // 1.5
			{Capacity: 2, Load: Load{Known: true, Waiting: 1}}, // 1.0
		}, []int{5, 0}, Options{BalanceAbs: 0.4, BalanceRel: 1.5}, 0},
		{"affinity holds at exactly abs", PrefixAffinity, []Candidate{
			{Capacity: 4, Load: Load{Known: true, Waiting: 3}}, // 1.5
			{Capacity: 2, Load: Load{Known: true, Waiting: 1}}, // 1.0
		}, []int{5, 0}, Options{BalanceAbs: 0.5, BalanceRel: 1.1}, 0},
		{"affinity yields just past both", PrefixAffinity, []Candidate{
			{Capacity: 4, Load: Load{Known: true, Waiting: 3}}, // 1.5
			{Capacity: 2, Load: Load{Known: true, Waiting: 1}}, // 1.0
		}, []int{5, 0}, Options{BalanceAbs: 0.4, BalanceRel: 1.4}, 1},
		{"affinity ignores negative match", PrefixAffinity, []Candidate{idle, half}, []int{-1, 0}, Options{}, 0},
		{"affinity yields when unbalanced", PrefixAffinity, []Candidate{busy, idle}, []int{5, 0}, Options{}, 1},
		{"affinity holds within abs", PrefixAffinity, []Candidate{half, idle}, []int{5, 0}, Options{}, 0},
		{"affinity holds within rel", PrefixAffinity, []Candidate{
			{InFlight: 0, Capacity: 1, Load: Load{Known: true, Waiting: 2}},   // 4.0
			{InFlight: 0, Capacity: 1, Load: Load{Known: true, Waiting: 1.5}}, // 3.0
		}, []int{5, 0}, Options{}, 0},
		{"affinity with tight thresholds", PrefixAffinity, []Candidate{half, idle}, []int{5, 0}, Options{BalanceAbs: 0.1, BalanceRel: 1.01}, 1},
		{"affinity at any load", PrefixAffinity, []Candidate{busy, idle}, []int{5, 0}, Options{BalanceAbs: math.Inf(1), BalanceRel: math.Inf(1)}, 0},
	} {
		if got := Pick(tc.s, tc.cands, tc.match, tc.opts); got != tc.want {
			t.Errorf("%s: Pick = %d; want %d", tc.name, got, tc.want)
		}
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	cands, match := benchCands()
	for _, s := range []Strategy{Ordered, LeastLoad, PrefixAffinity} {
		if n := testing.AllocsPerRun(100, func() { Pick(s, cands, match, Options{}) }); n != 0 {
			t.Errorf("Pick(%v) allocates %v times", s, n)
		}
	}
}

func TestHashAndLongestDoNotAllocate(t *testing.T) {
	p, prompt, ids := benchIndex()
	hashes := make([]uint64, 0, MaxBlocks)
	match := make([]int, 0, len(ids))
	var got []int
	n := testing.AllocsPerRun(100, func() {
		hashes = AppendHash(hashes[:0], prompt)
		got = p.Longest(match[:0], hashes, ids)
	})
	if n != 0 {
		t.Errorf("AppendHash+Longest allocate %v times", n)
	}
	for i, m := range got {
		if want := (i + 1) * 4; m != want {
			t.Errorf("id %d matched %d blocks; want %d", ids[i], m, want)
		}
	}
}
