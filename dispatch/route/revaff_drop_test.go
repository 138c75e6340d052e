package route

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// refDrop is Drop restated on the naive index.
func (r *refIndex) refDrop(hashes []uint64, id uint32) {
	for _, h := range hashes {
		e := r.find(h)
		if e == nil {
			continue
		}
		e.ids = slices.DeleteFunc(e.ids, func(x uint32) bool { return x == id })
		if len(e.ids) == 0 {
			r.ents = slices.DeleteFunc(r.ents, func(x *refEntry) bool { return x == e })
		}
	}
}

// TestPrefixesDropMatchesReference: records, drops, forgets and lookups in
// any order leave the index agreeing with the naive one (matches, size and
// which entry is evicted next, as later records and lookups show), with
// its bookkeeping straight: slots a drop frees are reused.
func TestPrefixesDropMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxEntries := rapid.IntRange(0, 14).Draw(t, "maxEntries")
		p := NewPrefixes(maxEntries)
		ref := &refIndex{max: maxEntries}
		genID := rapid.Uint32Range(0, 4)
		t.Repeat(map[string]func(*rapid.T){
			"record": func(t *rapid.T) {
				h := Hash(genPrompt(t))
				id := genID.Draw(t, "id")
				p.Record(h, id)
				ref.record(h, id)
			},
			"drop": func(t *rapid.T) {
				h := Hash(genPrompt(t))
				id := genID.Draw(t, "id")
				p.Drop(h, id)
				ref.refDrop(h, id)
			},
			"forget": func(t *rapid.T) {
				id := genID.Draw(t, "id")
				p.Forget(id)
				ref.forget(id)
			},
			"longest": func(t *rapid.T) {
				h := Hash(genPrompt(t))
				ids := rapid.SliceOfN(genID, 0, 5).Draw(t, "ids")
				if got, want := p.Longest(nil, h, ids), ref.longest(h, ids); !slices.Equal(got, want) {
					t.Fatalf("Longest(%d blocks, ids %v) = %v; reference %v", len(h), ids, got, want)
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

// Dropping one candidate leaves the others' matches, and the prefix the
// dropped one served through another prompt, as they were.
func TestPrefixesDropOnlyThatPrompt(t *testing.T) {
	p := NewPrefixes(DefaultMaxEntries)
	shared := make([]byte, 2*BlockSize)
	turn := append(slices.Clone(shared), make([]byte, 2*BlockSize)...)
	for i := range turn[2*BlockSize:] {
		turn[2*BlockSize+i] = 't'
	}
	other := append(slices.Clone(shared), make([]byte, 2*BlockSize)...)
	for i := range other[2*BlockSize:] {
		other[2*BlockSize+i] = 'o'
	}
	p.Record(Hash(other), 1)
	p.Record(Hash(turn), 1)
	p.Record(Hash(turn), 2)
	p.Drop(Hash(turn), 1)
	if got := p.Longest(nil, Hash(turn), []uint32{1, 2}); !slices.Equal(got, []int{0, 4}) {
		t.Fatalf("after the drop the turn matches %v; want [0 4]", got)
	}
	if got := p.Longest(nil, Hash(other), []uint32{1, 2}); !slices.Equal(got, []int{4, 2}) {
		t.Fatalf("the other prompt matches %v; want [4 2] (its deep blocks kept)", got)
	}
	if p.Len() != 6 {
		t.Fatalf("Len = %d; want 6 (2 shared, 2 of the turn, 2 of the other)", p.Len())
	}
}
