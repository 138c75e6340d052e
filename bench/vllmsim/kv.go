package vllmsim

// blockPool is the paged KV cache: fixed blocks, a hash table of blocks
// holding a full, computed block (prefix cache), and one free list. Free
// blocks without a hash sit at the front, freed hashed blocks are appended
// at the back, and allocation pops the front: so hashed blocks are evicted
// least recently freed first and only when no plain free block is left.
// Not safe for concurrent use: the engine's owner serializes it.
type blockPool struct {
	blocks     []kvBlock
	head, tail int32 // free list ends, -1 when empty
	numFree    int
	cached     map[uint64]int32 // block hash -> block holding it
	evictions  int64
}

type kvBlock struct {
	ref        int32
	hash       uint64
	hashed     bool
	inFree     bool
	prev, next int32
}

func newBlockPool(n int) *blockPool {
	p := &blockPool{blocks: make([]kvBlock, n), head: -1, tail: -1, cached: make(map[uint64]int32)}
	for i := range p.blocks {
		p.pushBack(int32(i))
	}
	return p
}

func (p *blockPool) pushBack(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.inFree = p.tail, -1, true
	if p.tail >= 0 {
		p.blocks[p.tail].next = id
	} else {
		p.head = id
	}
	p.tail = id
	p.numFree++
}

func (p *blockPool) pushFront(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.inFree = -1, p.head, true
	if p.head >= 0 {
		p.blocks[p.head].prev = id
	} else {
		p.tail = id
	}
	p.head = id
	p.numFree++
}

func (p *blockPool) unlink(id int32) {
	b := &p.blocks[id]
	if b.prev >= 0 {
		p.blocks[b.prev].next = b.next
	} else {
		p.head = b.next
	}
	if b.next >= 0 {
		p.blocks[b.next].prev = b.prev
	} else {
		p.tail = b.prev
	}
	b.prev, b.next, b.inFree = -1, -1, false
	p.numFree--
}

// lookup finds the block holding a computed block with this hash.
func (p *blockPool) lookup(h uint64) (int32, bool) {
	id, ok := p.cached[h]
	return id, ok
}

// touch takes a reference on a cached block, taking it off the free list if
// nobody held it.
func (p *blockPool) touch(id int32) {
	b := &p.blocks[id]
	if b.inFree {
		p.unlink(id)
	}
	b.ref++
}

// alloc takes the front free block, evicting its cached content.
func (p *blockPool) alloc() (int32, bool) {
	id := p.head
	if id < 0 {
		return 0, false
	}
	p.unlink(id)
	b := &p.blocks[id]
	if b.hashed {
		if p.cached[b.hash] == id {
			delete(p.cached, b.hash)
		}
		b.hashed = false
		p.evictions++
	}
	b.ref = 1
	return id, true
}

// free drops one reference on each block, last block first, so the tail of
// a sequence is evicted before its (more shareable) head.
func (p *blockPool) free(ids []int32) {
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		b := &p.blocks[id]
		b.ref--
		if b.ref > 0 {
			continue
		}
		if b.hashed {
			p.pushBack(id)
		} else {
			p.pushFront(id)
		}
	}
}

// register records that block id holds the computed block with hash h. A
// hash already held by another block is left there (duplicates are not
// merged, as in vLLM).
func (p *blockPool) register(id int32, h uint64) {
	if _, ok := p.cached[h]; ok {
		return
	}
	b := &p.blocks[id]
	b.hash, b.hashed = h, true
	p.cached[h] = id
}

// usage is the fraction of blocks in use; evictable cached blocks count as
// free, as in vLLM's kv_cache_usage_perc.
func (p *blockPool) usage() float64 {
	return 1 - float64(p.numFree)/float64(len(p.blocks))
}
