package openaiapi

import "math/bits"

// nameTable finds a string among a fixed list of names with one hash of
// four of its bytes and one comparison. Validation looks up every key of
// every object it reads, and every role and enum value it interns, in
// such lists of a few dozen short names; a Go map hashes the whole key
// and probes a group, several times the work, and was a fifth of the
// cost of validating a typical request.
//
// The hash is a multiplier, searched for when the table is built, under
// which the names' samples (length, first, middle and last byte) fall
// into distinct slots: a perfect hash for this list. A key that is none
// of the names lands on some slot and fails its comparison.
type nameTable struct {
	// slots has 1<<(32-shift) entries; a slot's index is -1 when empty.
	slots []nameSlot
	mul   uint32
	shift uint8
}

type nameSlot struct {
	name  string
	index int32
}

// newNameTable builds the table of names, which must be distinct and
// non-empty. It panics when no multiplier separates them (two names of
// one length that agree in the sampled bytes): the lists are the
// package's own, so a test run finds that at once.
func newNameTable(names []string) *nameTable {
	if len(names) == 0 {
		return &nameTable{slots: []nameSlot{{index: -1}}, shift: 32}
	}
	// Twice the names, rounded up to a power of two, then larger tables
	// if no multiplier within the tries separates them.
	for size := 2 << bits.Len(uint(len(names))-1); size <= 1<<12; size <<= 1 {
		shift := uint8(32 - bits.TrailingZeros(uint(size)))
		slots := make([]nameSlot, size)
	seeds:
		for try, mul := 0, uint32(0x9E3779B1); try < 4096; try, mul = try+1, mul*0x01000193+2 {
			for i := range slots {
				slots[i] = nameSlot{index: -1}
			}
			for i, n := range names {
				if n == "" {
					panic("openaiapi: empty name in a name table")
				}
				s := &slots[nameHash(sample(n), mul, shift)]
				if s.index >= 0 {
					if s.name == n {
						panic("openaiapi: name listed twice: " + n)
					}
					continue seeds
				}
				*s = nameSlot{name: n, index: int32(i)}
			}
			return &nameTable{slots: slots, mul: mul, shift: shift}
		}
	}
	panic("openaiapi: no hash separates the names")
}

// find returns the position of k in the table's list, or -1.
func (t *nameTable) find(k string) int {
	if len(k) == 0 {
		return -1
	}
	s := &t.slots[nameHash(sample(k), t.mul, t.shift)]
	if s.name != k {
		return -1
	}
	return int(s.index)
}

// findBytes is find of a key not yet a string (its sample written out: a
// []byte does not convert to a string without a copy); the comparison of
// a converted []byte does not allocate.
func (t *nameTable) findBytes(k []byte) int {
	if len(k) == 0 {
		return -1
	}
	x := uint32(len(k)) | uint32(k[0])<<8 | uint32(k[len(k)/2])<<16 | uint32(k[len(k)-1])<<24
	s := &t.slots[nameHash(x, t.mul, t.shift)]
	if s.name != string(k) {
		return -1
	}
	return int(s.index)
}

// sample packs a non-empty name's length and its first, middle and last
// bytes into one word, as find does.
func sample(k string) uint32 {
	return uint32(len(k)) | uint32(k[0])<<8 | uint32(k[len(k)/2])<<16 | uint32(k[len(k)-1])<<24
}

func nameHash(x, mul uint32, shift uint8) uint32 {
	return (x ^ x>>15) * mul >> shift
}
