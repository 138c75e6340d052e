package route

import (
	"bytes"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// refIndex is Prefixes restated naively: a slice of entries, each with a
// last-use clock; eviction scans for the oldest.
type refIndex struct {
	max   int
	clock int
	ents  []*refEntry
}

type refEntry struct {
	hash uint64
	ids  []uint32 // most recent first
	used int
}

func (r *refIndex) find(h uint64) *refEntry {
	for _, e := range r.ents {
		if e.hash == h {
			return e
		}
	}
	return nil
}

func (r *refIndex) record(hashes []uint64, id uint32) {
	if r.max <= 0 {
		return
	}
	for k := len(hashes) - 1; k >= 0; k-- {
		e := r.find(hashes[k])
		if e == nil {
			if len(r.ents) == r.max {
				oldest := 0
				for i, x := range r.ents {
					if x.used < r.ents[oldest].used {
						oldest = i
					}
				}
				r.ents = slices.Delete(r.ents, oldest, oldest+1)
			}
			e = &refEntry{hash: hashes[k]}
			r.ents = append(r.ents, e)
		}
		r.clock++
		e.used = r.clock
		ids := []uint32{id}
		for _, x := range e.ids {
			if x != id {
				ids = append(ids, x)
			}
		}
		e.ids = ids[:min(len(ids), IDsPerEntry)]
	}
}

func (r *refIndex) longest(hashes []uint64, ids []uint32) []int {
	out := make([]int, len(ids))
	for j, id := range ids {
		for k := 1; k <= len(hashes); k++ {
			if e := r.find(hashes[k-1]); e != nil && slices.Contains(e.ids, id) {
				out[j] = k
			}
		}
	}
	return out
}

func (r *refIndex) forget(id uint32) {
	r.ents = slices.DeleteFunc(r.ents, func(e *refEntry) bool {
		e.ids = slices.DeleteFunc(e.ids, func(x uint32) bool { return x == id })
		return len(e.ids) == 0
	})
}

// checkInternals verifies the index's own bookkeeping: the map, the LRU
// list and the free list account for every slot exactly once.
func checkInternals(t *rapid.T, p *Prefixes) {
	if len(p.idx) > p.max || len(p.ents) > p.max {
		t.Fatalf("index holds %d hashes in %d slots; bound %d", len(p.idx), len(p.ents), p.max)
	}
	seen := map[int32]bool{}
	n, prev := 0, int32(nilSlot)
	for s := p.head; s != nilSlot; s = p.ents[s].next {
		e := &p.ents[s]
		if seen[s] || e.prev != prev {
			t.Fatalf("LRU list broken at slot %d", s)
		}
		seen[s] = true
		if got, ok := p.idx[e.hash]; !ok || got != s {
			t.Fatalf("slot %d (hash %x) not indexed", s, e.hash)
		}
		if e.n == 0 || int(e.n) > IDsPerEntry {
			t.Fatalf("slot %d has %d ids", s, e.n)
		}
		ids := slices.Clone(e.ids[:e.n])
		slices.Sort(ids)
		if len(slices.Compact(ids)) != int(e.n) {
			t.Fatalf("slot %d repeats an id: %v", s, e.ids[:e.n])
		}
		prev = s
		n++
	}
	if prev != p.tail || n != len(p.idx) {
		t.Fatalf("LRU list has %d entries ending at %d; map %d, tail %d", n, prev, len(p.idx), p.tail)
	}
	for s := p.free; s != nilSlot; s = p.ents[s].next {
		if seen[s] {
			t.Fatalf("slot %d both live and free", s)
		}
		seen[s] = true
	}
	if len(seen) != len(p.ents) {
		t.Fatalf("%d slots accounted for of %d", len(seen), len(p.ents))
	}
}

// TestPrefixesMatchReference: after any sequence of records, forgets and
// lookups over prompts sharing prefixes, the index agrees with the naive
// one (same matches, same size), stays within its bound, keeps its
// bookkeeping straight, and a second index fed the same sequence answers
// the same (determinism).
func TestPrefixesMatchReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxEntries := rapid.IntRange(-1, 14).Draw(t, "maxEntries")
		p, twin := NewPrefixes(maxEntries), NewPrefixes(maxEntries)
		ref := &refIndex{max: maxEntries}
		genID := rapid.Uint32Range(0, 6)
		t.Repeat(map[string]func(*rapid.T){
			"record": func(t *rapid.T) {
				h := Hash(genPrompt(t))
				id := genID.Draw(t, "id")
				p.Record(h, id)
				twin.Record(h, id)
				ref.record(h, id)
			},
			"forget": func(t *rapid.T) {
				id := genID.Draw(t, "id")
				p.Forget(id)
				twin.Forget(id)
				ref.forget(id)
			},
			"longest": func(t *rapid.T) {
				h := Hash(genPrompt(t))
				ids := rapid.SliceOfN(genID, 0, 5).Draw(t, "ids")
				prefix := rapid.SliceOfN(rapid.IntRange(-3, 3), 0, 2).Draw(t, "dst")
				got := p.Longest(slices.Clone(prefix), h, ids)
				if !slices.Equal(got[:len(prefix)], prefix) {
					t.Fatalf("Longest changed dst's existing elements: %v -> %v", prefix, got)
				}
				want := ref.longest(h, ids)
				if !slices.Equal(got[len(prefix):], want) {
					t.Fatalf("Longest(%d blocks, ids %v) = %v; reference %v", len(h), ids, got[len(prefix):], want)
				}
				if again := twin.Longest(nil, h, ids); !slices.Equal(again, want) {
					t.Fatalf("a twin index answers %v; want %v", again, want)
				}
			},
			"": func(t *rapid.T) {
				if p.Len() != len(ref.ents) {
					t.Fatalf("Len = %d; reference holds %d", p.Len(), len(ref.ents))
				}
				checkInternals(t, p)
			},
		})
	})
}

// TestHashChain: hashes name whole prefixes. Two prompts built from shared
// blocks agree on hash i exactly when they agree on blocks 0..i; a trailing
// partial block changes nothing; at most MaxBlocks hashes are made.
func TestHashChain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genPrompt(t), genPrompt(t)
		ha, hb := Hash(a), Hash(b)
		if len(ha) != len(a)/BlockSize || len(hb) != len(b)/BlockSize {
			t.Fatalf("%d and %d hashes for %d and %d bytes", len(ha), len(hb), len(a), len(b))
		}
		for i := range min(len(ha), len(hb)) {
			same := bytes.Equal(a[:(i+1)*BlockSize], b[:(i+1)*BlockSize])
			if (ha[i] == hb[i]) != same {
				t.Fatalf("block %d: hashes equal %v, prefixes equal %v", i, ha[i] == hb[i], same)
			}
		}
		if full := a[:len(a)/BlockSize*BlockSize]; !slices.Equal(Hash(full), ha) {
			t.Fatalf("the partial tail changed the hashes")
		}
		if !slices.Equal(Hash(a), ha) {
			t.Fatalf("Hash is not deterministic")
		}
	})
}

func TestHashBounds(t *testing.T) {
	long := bytes.Repeat([]byte("x"), (MaxBlocks+3)*BlockSize+17)
	if n := len(Hash(long)); n != MaxBlocks {
		t.Errorf("%d hashes for a %d-byte prompt; want MaxBlocks %d", n, len(long), MaxBlocks)
	}
	if h := Hash(long[:BlockSize-1]); len(h) != 0 {
		t.Errorf("a prompt shorter than a block gave %d hashes", len(h))
	}
	// Repeated identical blocks still hash differently by position.
	h := Hash(long[:3*BlockSize])
	if h[0] == h[1] || h[1] == h[2] {
		t.Errorf("identical blocks at different depths share a hash: %x", h)
	}
	dst := []uint64{42}
	if got := AppendHash(dst, long[:2*BlockSize]); len(got) != 3 || got[0] != 42 || !slices.Equal(got[1:], Hash(long[:2*BlockSize])) {
		t.Errorf("AppendHash did not append: %x", got)
	}
}

// TestPrefixesEviction: a full index drops the least recently recorded
// prefix, deepest blocks first, and a shallow shared prefix outlives the
// deep tails recorded before it.
func TestPrefixesEviction(t *testing.T) {
	p := NewPrefixes(4)
	a := Hash(bytes.Repeat([]byte("a"), 3*BlockSize))
	b := Hash(bytes.Repeat([]byte("b"), 2*BlockSize))
	p.Record(a, 1) // a0 a1 a2
	p.Record(b, 2) // b1 fills the index; b0 evicts a2, the deepest of a
	if got := p.Longest(nil, a, []uint32{1, 2}); !slices.Equal(got, []int{2, 0}) {
		t.Errorf("after eviction a matches %v; want [2 0]", got)
	}
	if got := p.Longest(nil, b, []uint32{1, 2}); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("b matches %v; want [0 2]", got)
	}
	if p.Len() != 4 {
		t.Errorf("Len = %d; want 4", p.Len())
	}
	// Recent ids only: a fifth id pushes the oldest out of the entry.
	for id := uint32(10); id < 10+IDsPerEntry+1; id++ {
		p.Record(b[:1], id)
	}
	if got := p.Longest(nil, b[:1], []uint32{2, 10, 11, 14}); !slices.Equal(got, []int{0, 0, 1, 1}) {
		t.Errorf("b0 lists %v for ids 2,10,11,14; want [0 0 1 1]", got)
	}
	p.Forget(2) // b1 listed only 2: its entry goes
	if got := p.Longest(nil, b, []uint32{2}); !slices.Equal(got, []int{0}) {
		t.Errorf("a forgotten id still matches %v", got)
	}
	if p.Len() != 3 {
		t.Errorf("after Forget Len = %d; want 3", p.Len())
	}
	p.Record(b, 3) // reuses the freed slot, no eviction
	if got := p.Longest(nil, a, []uint32{1}); !slices.Equal(got, []int{2}) {
		t.Errorf("recording into a freed slot evicted a: %v", got)
	}
}
