package vllmsim

import (
	"slices"
	"sync/atomic"
	"time"
)

type seqState uint8

const (
	stWaiting seqState = iota
	stRunning
	stFinished
	stAborted
)

// seq is one request in the engine. Fields without a note are guarded by
// the owner of the engine (Server.mu); the handler reads only the atomics
// and notify.
type seq struct {
	id          uint64
	tokens      []uint32 // prompt, then generated tokens
	promptLen   int
	maxTokens   int
	seed        uint64   // picks the generated words
	hashes      []uint64 // chained hashes of the full blocks of tokens, computed lazily
	blocks      []int32  // KV blocks, in token order
	numComputed int      // tokens whose KV is in blocks
	registered  int      // leading blocks registered in the prefix cache
	prefilled   bool     // all tokens computed once since admission: steps now decode
	cachedToks  int      // prompt tokens found cached at the last admission
	state       seqState

	emitted  atomic.Int64  // generated tokens so far
	finished atomic.Bool   // set after the last emitted store
	notify   chan struct{} // capacity 1: progress or end
}

func (q *seq) signal() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// hashAt returns the chained hash of full block b.
func (q *seq) hashAt(b, bs int) uint64 {
	for len(q.hashes) <= b {
		i := len(q.hashes)
		var parent uint64
		if i > 0 {
			parent = q.hashes[i-1]
		}
		q.hashes = append(q.hashes, blockHash(parent, q.tokens[i*bs:(i+1)*bs]))
	}
	return q.hashes[b]
}

// work is one sequence's share of a step.
type work struct {
	q *seq
	n int // tokens computed for q
}

// step is a planned batch.
type step struct {
	items         []work
	prefillTokens int
	cost          time.Duration // simulated, unscaled
}

// engine is the scheduler and KV state, driven by plan and apply. It has no
// goroutine and no lock: Server serializes it, tests drive it directly.
type engine struct {
	cfg     Config
	pool    *blockPool
	waiting []*seq // FCFS; preempted sequences go back to the front
	running []*seq // admission order: the last is preempted first
	nextID  uint64
	stats   Stats
	cur     step // reused between steps
}

func newEngine(cfg Config) *engine {
	return &engine{cfg: cfg, pool: newBlockPool(cfg.NumBlocks)}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// add queues a new sequence.
func (e *engine) add(prompt []uint32, maxTokens int) *seq {
	e.nextID++
	q := &seq{
		id:        e.nextID,
		tokens:    prompt,
		promptLen: len(prompt),
		maxTokens: maxTokens,
		seed:      promptSeed(prompt),
		notify:    make(chan struct{}, 1),
	}
	e.waiting = append(e.waiting, q)
	return q
}

// idle reports whether there is nothing to schedule.
func (e *engine) idle() bool { return len(e.waiting) == 0 && len(e.running) == 0 }

// release frees q's blocks and forgets its progress.
func (e *engine) release(q *seq) {
	e.pool.free(q.blocks)
	q.blocks = q.blocks[:0]
	q.numComputed, q.registered, q.prefilled = 0, 0, false
}

// abort drops q wherever it is, freeing its blocks at once.
func (e *engine) abort(q *seq) {
	switch q.state {
	case stWaiting:
		if i := slices.Index(e.waiting, q); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
	case stRunning:
		if i := slices.Index(e.running, q); i >= 0 {
			e.running = slices.Delete(e.running, i, i+1)
		}
		e.release(q)
	default:
		return
	}
	q.state = stAborted
	e.stats.Aborted++
}

// grow allocates blocks so q holds upto tokens, all or nothing.
func (e *engine) grow(q *seq, upto int) bool {
	need := ceilDiv(upto, e.cfg.BlockSize) - len(q.blocks)
	if need <= 0 {
		return true
	}
	if e.pool.numFree < need {
		return false
	}
	for range need {
		id, _ := e.pool.alloc()
		q.blocks = append(q.blocks, id)
	}
	return true
}

// preemptLast moves the most recently admitted running sequence back to the
// front of the queue (recompute preemption).
func (e *engine) preemptLast() *seq {
	v := e.running[len(e.running)-1]
	e.running = e.running[:len(e.running)-1]
	e.release(v)
	v.state = stWaiting
	e.waiting = slices.Insert(e.waiting, 0, v)
	e.stats.Preemptions++
	return v
}

// admit tries to start the head of the queue: the cached prefix is reused
// and every other block of its tokens must fit.
func (e *engine) admit(q *seq) bool {
	bs := e.cfg.BlockSize
	var hits []int32
	freeHits := 0
	for b := 0; b < (len(q.tokens)-1)/bs; b++ {
		id, ok := e.pool.lookup(q.hashAt(b, bs))
		if !ok {
			break
		}
		hits = append(hits, id)
		if e.pool.blocks[id].inFree {
			freeHits++
		}
	}
	need := ceilDiv(len(q.tokens), bs) - len(hits)
	if e.pool.numFree-freeHits < need {
		return false
	}
	for _, id := range hits {
		e.pool.touch(id)
	}
	q.blocks = append(q.blocks[:0], hits...)
	q.numComputed = len(hits) * bs
	q.registered = len(hits)
	q.cachedToks = q.numComputed
	e.grow(q, len(q.tokens))
	e.stats.PrefixQueries += int64(len(q.tokens))
	e.stats.PrefixHits += int64(q.numComputed)
	q.state = stRunning
	return true
}

// plan picks the next batch: running sequences first, preempting from the
// back when a decode needs a block and none is free, then waiting ones
// (unless something was preempted) while slots, blocks and budget last.
func (e *engine) plan() *step {
	st := &e.cur
	st.items, st.prefillTokens, st.cost = st.items[:0], 0, 0
	budget := e.cfg.MaxBatchedTokens
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		q := e.running[i]
		n := min(len(q.tokens)-q.numComputed, budget)
		if n <= 0 {
			continue
		}
		ok := true
		for !e.grow(q, q.numComputed+n) {
			preempted = true
			if e.preemptLast() == q {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		st.items = append(st.items, work{q, n})
		budget -= n
	}
	for !preempted && len(e.waiting) > 0 && len(e.running) < e.cfg.MaxNumSeqs && budget > 0 {
		q := e.waiting[0]
		if !e.admit(q) {
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, q)
		n := min(len(q.tokens)-q.numComputed, budget)
		st.items = append(st.items, work{q, n})
		budget -= n
	}
	for _, it := range st.items {
		if !it.q.prefilled {
			st.prefillTokens += it.n
		}
	}
	if len(st.items) > 0 {
		st.cost = e.cfg.DecodeBase + time.Duration(len(st.items))*e.cfg.DecodePerSeq +
			time.Duration(st.prefillTokens)*e.cfg.PrefillPerToken
	}
	return st
}

// apply completes a planned step: computed tokens land in the KV cache
// (full blocks become cacheable), each sequence with all tokens computed
// emits one token, finished sequences free their blocks. Sequences aborted
// while the step ran are skipped.
func (e *engine) apply(st *step) {
	bs := e.cfg.BlockSize
	finished := false
	for _, it := range st.items {
		q := it.q
		if q.state != stRunning {
			continue
		}
		q.numComputed += it.n
		for ; (q.registered+1)*bs <= q.numComputed; q.registered++ {
			e.pool.register(q.blocks[q.registered], q.hashAt(q.registered, bs))
		}
		if q.numComputed < len(q.tokens) {
			continue
		}
		q.prefilled = true
		gen := len(q.tokens) - q.promptLen
		q.tokens = append(q.tokens, answerIDs[answerIndex(q.seed, gen)])
		e.stats.GenerationTokens++
		q.emitted.Store(int64(gen + 1))
		if gen+1 >= q.maxTokens {
			e.release(q)
			q.state = stFinished
			q.finished.Store(true)
			e.stats.Finished++
			finished = true
		}
		q.signal()
	}
	if finished {
		e.running = slices.DeleteFunc(e.running, func(q *seq) bool { return q.state != stRunning })
	}
	if len(st.items) > 0 {
		e.stats.Steps++
		e.stats.SimBusy += st.cost
		e.stats.PrefillTokens += int64(st.prefillTokens)
	}
}

// snapshot returns the counters with the gauges filled in.
func (e *engine) snapshot() Stats {
	s := e.stats
	s.Running, s.Waiting = len(e.running), len(e.waiting)
	s.KVUsage = e.pool.usage()
	s.CachedBlocks = len(e.pool.cached)
	s.Evictions = e.pool.evictions
	return s
}

// Stats are the simulator's counters; token counts are in tokens, times
// are simulated (unscaled).
type Stats struct {
	Running, Waiting int           // sequences now
	KVUsage          float64       // fraction of blocks held by sequences (vllm:kv_cache_usage_perc)
	CachedBlocks     int           // blocks holding a registered prefix block (held or evictable)
	PrefixQueries    int64         // prompt tokens looked up at admission (vllm:prefix_cache_queries)
	PrefixHits       int64         // of those, found cached (vllm:prefix_cache_hits)
	PromptTokens     int64         // prompt tokens of accepted requests (vllm:prompt_tokens)
	PrefillTokens    int64         // tokens computed in prefill (uncached prompt + recompute)
	GenerationTokens int64         // tokens emitted (vllm:generation_tokens)
	Accepted         int64         // requests queued
	Rejected         int64         // requests refused: 429 (queue full), 400/404 (invalid, too long, unknown model)
	Finished         int64         // sequences that reached max_tokens
	Aborted          int64         // sequences dropped because the client went away
	Preemptions      int64         // recompute preemptions (vllm:num_preemptions)
	Evictions        int64         // cached blocks evicted for reuse
	Steps            int64         // engine steps run
	SimBusy          time.Duration // simulated time spent in steps (unscaled)
}
