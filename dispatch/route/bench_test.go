package route

import (
	"math/rand/v2"
	"testing"
)

// benchCands is eight fitting candidates with varied loads and matches.
func benchCands() ([]Candidate, []int) {
	cands := make([]Candidate, 8)
	match := make([]int, 8)
	for i := range cands {
		cands[i] = Candidate{InFlight: i % 4, Capacity: 8, Load: Load{Known: i%3 != 0, Running: float64(i), Waiting: float64(i % 2), KVUsage: float64(i) / 8}}
		match[i] = (i * 5) % 7
	}
	return cands, match
}

// benchIndex is an index where id i served the first (i+1)*4 blocks of an
// 8 KiB prompt, among other prompts.
func benchIndex() (*Prefixes, []byte, []uint32) {
	r := rand.New(rand.NewPCG(1, 2))
	prompt := make([]byte, 8<<10)
	for i := range prompt {
		prompt[i] = byte(r.Uint32())
	}
	p := NewPrefixes(DefaultMaxEntries)
	other := make([]byte, 8<<10)
	for n := range 200 {
		for i := range other {
			other[i] = byte(r.Uint32())
		}
		p.Record(Hash(other), uint32(n%8))
	}
	ids := []uint32{0, 1, 2, 3, 4, 5, 6, 7}
	for i := len(ids) - 1; i >= 0; i-- {
		p.Record(Hash(prompt[:(i+1)*4*BlockSize]), ids[i])
	}
	return p, prompt, ids
}

func BenchmarkPick(b *testing.B) {
	cands, match := benchCands()
	for _, s := range []Strategy{Ordered, LeastLoad, PrefixAffinity} {
		b.Run(s.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Pick(s, cands, match, Options{})
			}
		})
	}
}

func BenchmarkHashLongest8KiB(b *testing.B) {
	p, prompt, ids := benchIndex()
	hashes := make([]uint64, 0, MaxBlocks)
	match := make([]int, 0, len(ids))
	b.ReportAllocs()
	b.SetBytes(int64(len(prompt)))
	for b.Loop() {
		hashes = AppendHash(hashes[:0], prompt)
		match = p.Longest(match[:0], hashes, ids)
	}
}

func BenchmarkRecord8KiB(b *testing.B) {
	p, prompt, _ := benchIndex()
	hashes := Hash(prompt)
	b.ReportAllocs()
	var id uint32
	for b.Loop() {
		p.Record(hashes, id%8)
		id++
	}
}
