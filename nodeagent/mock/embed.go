package mock

import (
	"encoding/binary"
	"hash/fnv"
	"math"
)

// EmbeddingDims is the length of every mock embedding vector.
const EmbeddingDims = 8

// embed derives a deterministic unit vector from text: each dimension is an
// FNV-1a hash of (dimension index, text) mapped to [-1, 1], then the vector
// is L2-normalized. Equal texts give equal vectors across runs and builds.
func embed(text string) []float64 {
	v := make([]float64, EmbeddingDims)
	var norm float64
	for d := range v {
		h := fnv.New64a()
		var idx [8]byte
		binary.LittleEndian.PutUint64(idx[:], uint64(d))
		h.Write(idx[:])
		h.Write([]byte(text))
		x := float64(h.Sum64())/float64(math.MaxUint64)*2 - 1
		v[d] = x
		norm += x * x
	}
	if norm == 0 {
		// Practically unreachable; keeps the output finite regardless.
		v[0], norm = 1, 1
	}
	norm = math.Sqrt(norm)
	for d := range v {
		v[d] /= norm
	}
	return v
}
