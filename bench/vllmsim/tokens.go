package vllmsim

import (
	"encoding/binary"
	"hash/fnv"
)

// Token ids are FNV-1a 32 hashes of text pieces; see the package doc.

const (
	fnv32Offset = 2166136261
	fnv32Prime  = 16777619
	fnv64Offset = 14695981039346656037
	fnv64Prime  = 1099511628211
)

func pieceID(b string) uint32 {
	h := uint32(fnv32Offset)
	for i := 0; i < len(b); i++ {
		h ^= uint32(b[i])
		h *= fnv32Prime
	}
	return h
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// appendText tokenizes s: whitespace-separated words, each cut into pieces
// of at most 4 bytes.
func appendText(dst []uint32, s string) []uint32 {
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		for k := i; k < j; k += 4 {
			dst = append(dst, pieceID(s[k:min(k+4, j)]))
		}
		i = j
	}
	return dst
}

// Template token ids.
var (
	tokEnd       = pieceID("<|end|>")
	tokAssistant = pieceID("<|assistant|>")
)

// message is one chat message, its content already flattened to text.
type message struct {
	role, content string
}

// tokenize renders messages with the simulator's chat template and returns
// the prompt token ids: <|role|> content <|end|> for each message, then
// <|assistant|> (the generation prompt).
func tokenize(msgs []message) []uint32 {
	n := 1
	for _, m := range msgs {
		n += 2 + len(m.content)/4 + 1
	}
	toks := make([]uint32, 0, n)
	for _, m := range msgs {
		toks = append(toks, pieceID("<|"+m.role+"|>"))
		toks = appendText(toks, m.content)
		toks = append(toks, tokEnd)
	}
	return append(toks, tokAssistant)
}

// answerWords are the generated tokens' texts: each at most 4 bytes, so it
// tokenizes back to exactly one id.
var answerWords = [...]string{
	"the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as", "was", "at", "by", "this",
	"be", "from", "or", "an", "are", "not", "but", "can", "we", "all", "one", "our", "has", "more", "when", "will",
	"so", "if", "each", "node", "edge", "load", "fast", "path", "data", "time", "step", "blok", "page", "core",
}

var answerIDs = func() [len(answerWords)]uint32 {
	var ids [len(answerWords)]uint32
	for i, w := range answerWords {
		ids[i] = pieceID(w)
	}
	return ids
}()

// answerIndex picks the i-th generated word of a sequence seeded by seed;
// the same prompt always yields the same answer, like greedy decoding.
func answerIndex(seed uint64, i int) int {
	x := seed + uint64(i)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return int(x % uint64(len(answerWords)))
}

// answerText is the streamed text of generated token i: words separated by
// single spaces.
func answerText(seed uint64, i int) string {
	w := answerWords[answerIndex(seed, i)]
	if i == 0 {
		return w
	}
	return " " + w
}

// blockHash chains a full block's hash to its parent's, as vLLM's automatic
// prefix caching does, so equal hashes mean equal whole prefixes.
func blockHash(parent uint64, toks []uint32) uint64 {
	h := uint64(fnv64Offset)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], parent)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnv64Prime
	}
	for _, t := range toks {
		binary.LittleEndian.PutUint32(b[:4], t)
		for _, c := range b[:4] {
			h ^= uint64(c)
			h *= fnv64Prime
		}
	}
	return h
}

// promptSeed seeds a prompt's answer.
func promptSeed(toks []uint32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range toks {
		binary.LittleEndian.PutUint32(b[:], t)
		_, _ = h.Write(b[:])
	}
	return h.Sum64()
}
