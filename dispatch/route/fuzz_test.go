package route

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzHash: any bytes hash without panicking into one hash per full block
// (at most MaxBlocks); hashing is deterministic; a prefix of the prompt
// hashes to a prefix of the hashes; and changing one byte changes the hash
// of its block and every later one, never an earlier one.
func FuzzHash(f *testing.F) {
	f.Add([]byte(""), uint(0), byte(1))
	f.Add(bytes.Repeat([]byte("system prompt "), 100), uint(700), byte(7))
	f.Add(bytes.Repeat([]byte{0}, 3*BlockSize+5), uint(BlockSize), byte(0xff))
	f.Fuzz(func(t *testing.T, data []byte, at uint, flip byte) {
		h := Hash(data)
		if want := min(len(data)/BlockSize, MaxBlocks); len(h) != want {
			t.Fatalf("%d hashes for %d bytes; want %d", len(h), len(data), want)
		}
		if again := AppendHash(make([]uint64, 0, 1), data); !slices.Equal(again, h) {
			t.Fatalf("hashing again differs")
		}
		if len(data) == 0 {
			return
		}
		cut := int(at % uint(len(data)+1))
		if hc := Hash(data[:cut]); !slices.Equal(hc, h[:len(hc)]) {
			t.Fatalf("a %d-byte prefix does not hash to a prefix", cut)
		}
		if flip == 0 {
			return
		}
		i := int(at % uint(len(data)))
		changed := bytes.Clone(data)
		changed[i] ^= flip
		hc := Hash(changed)
		blk := i / BlockSize
		for j := range h {
			if (j < blk) != (hc[j] == h[j]) {
				t.Fatalf("byte %d (block %d) changed: hash %d equal=%v", i, blk, j, hc[j] == h[j])
			}
		}
	})
}
