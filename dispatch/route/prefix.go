package route

import (
	"encoding/binary"
	"hash/maphash"
)

const (
	// BlockSize is the bytes of prompt text one hash block covers (about 64
	// tokens): coarse enough that a request touches few index entries,
	// fine enough that a shared system prompt or conversation history
	// matches most of its length.
	BlockSize = 256
	// MaxBlocks bounds the blocks hashed per request (32 KiB of text), and
	// so the work done under the dispatcher's lock for one request.
	MaxBlocks = 128
	// IDsPerEntry is how many candidate ids an index entry remembers, most
	// recent first: a popular prefix (a common system prompt) is cached on
	// several backends at once.
	IDsPerEntry = 4
	// DefaultMaxEntries is a reasonable NewPrefixes bound for one model:
	// 16384 blocks is 4 MiB of distinct prompt text, about a million
	// tokens, more than a few backends' KV caches hold, in about 1 MiB.
	DefaultMaxEntries = 1 << 14
)

// seed keys the block hashes. Random per process: the index lives in
// memory only, and nobody can craft a prompt that collides with another
// tenant's prefix to steer its routing.
var seed = maphash.MakeSeed()

// Hash returns the chained block hashes of a canonical prompt text; see
// AppendHash.
func Hash(prompt []byte) []uint64 {
	return AppendHash(make([]uint64, 0, min(len(prompt)/BlockSize, MaxBlocks)), prompt)
}

// AppendHash appends to dst one hash per full BlockSize block of prompt, at
// most MaxBlocks, and returns the extended slice; a trailing partial block
// is ignored. Block i's hash covers blocks 0..i (it is keyed by block i-1's
// hash), so two prompts share the first k hashes exactly when they share
// the first k blocks (up to 64-bit collisions). Callers should hash one
// canonical rendering of the prompt (roles and contents in order), so that
// the same conversation hashes alike whichever API surface carried it.
// With a dst of enough capacity it does not allocate.
func AppendHash(dst []uint64, prompt []byte) []uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var prev [8]byte
	n := min(len(prompt)/BlockSize, MaxBlocks)
	for i := range n {
		h.Reset()
		if i > 0 {
			h.Write(prev[:])
		}
		h.Write(prompt[i*BlockSize : (i+1)*BlockSize])
		sum := h.Sum64()
		binary.LittleEndian.PutUint64(prev[:], sum)
		dst = append(dst, sum)
	}
	return dst
}

// Prefixes is a bounded, approximate index of which candidates recently
// served which prompt prefixes: for each block hash (see AppendHash) the
// ids of the last IDsPerEntry candidates a request with that prefix was
// sent to. At most maxEntries hashes are kept; the least recently recorded
// is evicted first. Candidates are identified by a uint32 the caller
// assigns, stable while the candidate's backend keeps its cache (say one
// per dispatch resource; Forget it when the backend restarts). When one
// Prefixes serves several models that may share a backend with different
// weights, give each (model, resource) pair its own id.
//
// A Prefixes is not safe for concurrent use: the caller holds its lock
// around every call.
type Prefixes struct {
	max int
	// idx maps a block hash to its entry in ents.
	idx  map[uint64]int32
	ents []entry
	// head is the most recently recorded entry, tail the least; the LRU
	// list runs through entry.prev/next. free chains slots of ents emptied
	// by Forget through entry.next. nilSlot ends each list.
	head, tail, free int32
}

const nilSlot = -1

type entry struct {
	hash       uint64
	prev, next int32
	n          uint8 // ids in use
	ids        [IDsPerEntry]uint32
}

// NewPrefixes returns an empty index holding at most maxEntries block
// hashes (DefaultMaxEntries is a sensible bound); with maxEntries <= 0 it
// records nothing and matches nothing.
func NewPrefixes(maxEntries int) *Prefixes {
	maxEntries = max(maxEntries, 0)
	return &Prefixes{
		max:  maxEntries,
		idx:  make(map[uint64]int32, min(maxEntries, 1024)),
		head: nilSlot, tail: nilSlot, free: nilSlot,
	}
}

// Len is the number of block hashes held, never more than the bound.
func (p *Prefixes) Len() int { return len(p.idx) }

// Record notes that candidate id was just sent a prompt with these block
// hashes (AppendHash's, in order). The deepest block is touched first and
// the first block last, so eviction takes deep blocks before the shallow
// ones they extend, and a prefix stays matchable for as long as possible.
func (p *Prefixes) Record(hashes []uint64, id uint32) {
	if p.max == 0 {
		return
	}
	for k := len(hashes) - 1; k >= 0; k-- {
		e := p.touch(hashes[k])
		e.push(id)
	}
}

// Longest appends to dst, for each ids[j], the number of leading blocks of
// hashes that ids[j] served last: the largest k such that the entry of
// hashes[k-1] lists ids[j], or 0. It returns the extended slice; pass a
// reused buffer[:0] to avoid allocating. Looking does not count as use for
// eviction.
func (p *Prefixes) Longest(dst []int, hashes []uint64, ids []uint32) []int {
	base := len(dst)
	for range ids {
		dst = append(dst, 0)
	}
	out := dst[base:]
	unresolved := len(ids)
	// From the deepest block down: the first entry listing an id is its
	// longest match.
	for k := len(hashes); k > 0 && unresolved > 0; k-- {
		slot, ok := p.idx[hashes[k-1]]
		if !ok {
			continue
		}
		e := &p.ents[slot]
		for _, have := range e.ids[:e.n] {
			for j, want := range ids {
				if want == have && out[j] == 0 {
					out[j] = k
					unresolved--
				}
			}
		}
	}
	return dst
}

// Forget drops id from every entry (its backend restarted, or it is gone),
// freeing entries left with no id. It walks the whole index, so it is for
// rare events only.
func (p *Prefixes) Forget(id uint32) {
	for s := p.head; s != nilSlot; {
		next := p.ents[s].next
		p.drop(s, id)
		s = next
	}
}

// Drop removes id from the entries of these hashes (AppendHash's), freeing
// entries left with no id: the prompt was recorded for id, but id does not
// hold it (its attempt failed over to another candidate, which Record
// learnt). Without it the two would match alike and ties would go by
// load and order, as likely as not back to the candidate that failed.
// Looking an entry up does not count as use for eviction.
func (p *Prefixes) Drop(hashes []uint64, id uint32) {
	for _, h := range hashes {
		if s, ok := p.idx[h]; ok {
			p.drop(s, id)
		}
	}
}

// drop removes id from the entry in slot s, freeing the slot when that
// leaves the entry with no id.
func (p *Prefixes) drop(s int32, id uint32) {
	e := &p.ents[s]
	if !e.remove(id) || e.n > 0 {
		return
	}
	p.unlink(s)
	delete(p.idx, e.hash)
	e.next = p.free
	p.free = s
}

// touch returns the entry for hash, created if need be (evicting the least
// recently used when full), moved to the front of the LRU list.
func (p *Prefixes) touch(hash uint64) *entry {
	if s, ok := p.idx[hash]; ok {
		if s != p.head {
			p.unlink(s)
			p.pushFront(s)
		}
		return &p.ents[s]
	}
	var s int32
	switch {
	case p.free != nilSlot:
		s = p.free
		p.free = p.ents[s].next
	case len(p.ents) < p.max:
		p.ents = append(p.ents, entry{})
		s = int32(len(p.ents) - 1)
	default:
		s = p.tail
		p.unlink(s)
		delete(p.idx, p.ents[s].hash)
	}
	p.ents[s] = entry{hash: hash}
	p.idx[hash] = s
	p.pushFront(s)
	return &p.ents[s]
}

func (p *Prefixes) unlink(s int32) {
	e := &p.ents[s]
	if e.prev != nilSlot {
		p.ents[e.prev].next = e.next
	} else {
		p.head = e.next
	}
	if e.next != nilSlot {
		p.ents[e.next].prev = e.prev
	} else {
		p.tail = e.prev
	}
	e.prev, e.next = nilSlot, nilSlot
}

func (p *Prefixes) pushFront(s int32) {
	e := &p.ents[s]
	e.prev, e.next = nilSlot, p.head
	if p.head != nilSlot {
		p.ents[p.head].prev = s
	} else {
		p.tail = s
	}
	p.head = s
}

// push makes id the most recent of e's ids, dropping the oldest when full.
func (e *entry) push(id uint32) {
	i := 0
	for i < int(e.n) && e.ids[i] != id {
		i++
	}
	if i == int(e.n) { // absent: make room at the end
		if e.n < IDsPerEntry {
			e.n++
		}
		i = int(e.n) - 1
	}
	copy(e.ids[1:i+1], e.ids[:i])
	e.ids[0] = id
}

// remove drops id from e's ids, reporting whether it was there.
func (e *entry) remove(id uint32) bool {
	for i := range int(e.n) {
		if e.ids[i] == id {
			copy(e.ids[i:e.n], e.ids[i+1:e.n])
			e.n--
			return true
		}
	}
	return false
}
