package vllmsim

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func testEngine(c Config) *engine {
	return newEngine(c.withDefaults())
}

// seqTokens returns n distinct token ids starting at base.
func seqTokens(base uint32, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = base + uint32(i)
	}
	return t
}

// drain runs steps until the engine is idle, checking invariants on the
// way.
func drain(t *testing.T, e *engine) {
	t.Helper()
	for i := 0; !e.idle(); i++ {
		if i > 100000 {
			t.Fatal("engine does not finish")
		}
		st := e.plan()
		if len(st.items) == 0 {
			t.Fatalf("engine stuck: %d running, %d waiting", len(e.running), len(e.waiting))
		}
		if len(e.running) > e.cfg.MaxNumSeqs {
			t.Fatalf("%d running > max %d", len(e.running), e.cfg.MaxNumSeqs)
		}
		e.apply(st)
	}
}

func TestTokenizeAnswerRoundTrip(t *testing.T) {
	if got := appendText(nil, "  hello\tworld  "); len(got) != 4 { // hell o worl d
		t.Fatalf("hello world: %d tokens, want 4", len(got))
	}
	var text strings.Builder
	var want []uint32
	for i := range 50 {
		text.WriteString(answerText(7, i))
		want = append(want, answerIDs[answerIndex(7, i)])
	}
	if got := appendText(nil, text.String()); !slices.Equal(got, want) {
		t.Fatalf("answer text does not tokenize back to the generated ids:\n%v\n%v", got, want)
	}
}

func TestPrefixHitAfterRepeatedSystemPrompt(t *testing.T) {
	e := testEngine(Config{BlockSize: 16, NumBlocks: 64})
	sys := strings.Repeat("you are a very kind and calm bot ", 5) // 40 tokens
	a := e.add(tokenize([]message{{"system", sys}, {"user", "first question here"}}), 4)
	drain(t, e)
	if e.stats.PrefixHits != 0 || a.cachedToks != 0 {
		t.Fatalf("cold start hit %d tokens", e.stats.PrefixHits)
	}
	b := e.add(tokenize([]message{{"system", sys}, {"user", "other ask"}}), 4)
	before := e.stats.PrefillTokens
	drain(t, e)
	// Shared: <|system|> + 40 + <|end|> + <|user|> = 43 tokens -> 2 full blocks.
	if b.cachedToks != 32 || e.stats.PrefixHits != 32 {
		t.Fatalf("second request hit %d tokens (stat %d), want 32", b.cachedToks, e.stats.PrefixHits)
	}
	if got, want := e.stats.PrefillTokens-before, int64(b.promptLen-32); got != want {
		t.Fatalf("prefilled %d tokens, want only the uncached %d", got, want)
	}
	if e.stats.PrefixQueries != int64(a.promptLen+b.promptLen) {
		t.Fatalf("queries %d, want %d", e.stats.PrefixQueries, a.promptLen+b.promptLen)
	}

	// The next turn carries a's answer: generated blocks are reused too.
	var answer strings.Builder
	for i := range 4 {
		answer.WriteString(answerText(a.seed, i))
	}
	c := e.add(tokenize([]message{{"system", sys}, {"user", "first question here"},
		{"assistant", answer.String()}, {"user", "and then"}}), 4)
	drain(t, e)
	if want := (len(a.tokens) - 1) / 16 * 16; c.cachedToks != want || want <= 32 {
		t.Fatalf("follow-up hit %d tokens, want %d (system prompt and first turn)", c.cachedToks, want)
	}
	if e.pool.numFree != 64 {
		t.Fatalf("%d blocks free after all finished, want 64", e.pool.numFree)
	}
}

func TestLRUEviction(t *testing.T) {
	// 13-token prompts: 3 full blocks (cached) + 1 partial; 10 blocks hold
	// two idle prompts plus the one running.
	e := testEngine(Config{BlockSize: 4, NumBlocks: 10})
	prompts := map[string][]uint32{}
	for i, n := range []string{"a", "b", "c", "d"} {
		prompts[n] = seqTokens(uint32(1000*(i+1)), 13)
		e.add(slices.Clone(prompts[n]), 1)
		drain(t, e)
	}
	if e.pool.evictions != 3 {
		t.Fatalf("%d evictions, want 3 (a's blocks, the least recently freed)", e.pool.evictions)
	}
	if e.stats.PrefixHits != 0 {
		t.Fatalf("distinct prompts hit %d tokens", e.stats.PrefixHits)
	}
	b := e.add(slices.Clone(prompts["b"]), 1)
	drain(t, e)
	if b.cachedToks != 12 {
		t.Fatalf("b (recent) hit %d tokens, want 12", b.cachedToks)
	}
	a := e.add(slices.Clone(prompts["a"]), 1)
	drain(t, e)
	if a.cachedToks != 0 {
		t.Fatalf("a (evicted) hit %d tokens, want 0", a.cachedToks)
	}
}

func TestMaxNumSeqsAndFCFS(t *testing.T) {
	e := testEngine(Config{BlockSize: 4, NumBlocks: 100, MaxNumSeqs: 2})
	var qs []*seq
	for i := range 5 {
		qs = append(qs, e.add(seqTokens(uint32(100*i), 6), 3))
	}
	e.apply(e.plan())
	if len(e.running) != 2 || len(e.waiting) != 3 || e.running[0] != qs[0] || e.running[1] != qs[1] {
		t.Fatalf("running %d waiting %d after the first step, want 2 and 3 in order", len(e.running), len(e.waiting))
	}
	drain(t, e)
	for i, q := range qs {
		if !q.finished.Load() || q.emitted.Load() != 3 {
			t.Fatalf("seq %d: finished %v emitted %d", i, q.finished.Load(), q.emitted.Load())
		}
	}
}

func TestStepCost(t *testing.T) {
	c := Config{BlockSize: 16, NumBlocks: 1000, DecodeBase: 10 * time.Millisecond,
		DecodePerSeq: time.Millisecond, PrefillPerToken: 100 * time.Microsecond, MaxBatchedTokens: 64}
	decodeCost := func(n int) time.Duration {
		e := testEngine(c)
		for i := range n {
			e.add(seqTokens(uint32(1000*i), 8), 100)
		}
		e.apply(e.plan()) // prefill, first token
		return e.plan().cost
	}
	one, eight := decodeCost(1), decodeCost(8)
	if one != 11*time.Millisecond || eight != 18*time.Millisecond {
		t.Fatalf("decode step with 1 seq %v, with 8 %v; want 11ms and 18ms", one, eight)
	}

	// Chunked prefill: 100 prompt tokens, budget 64 -> 64 then 36; the first
	// token comes after the second step.
	e := testEngine(c)
	q := e.add(seqTokens(1, 100), 5)
	st := e.plan()
	if st.prefillTokens != 64 || st.cost != 10*time.Millisecond+time.Millisecond+64*100*time.Microsecond {
		t.Fatalf("first prefill step: %d tokens, cost %v", st.prefillTokens, st.cost)
	}
	e.apply(st)
	if q.emitted.Load() != 0 {
		t.Fatal("token emitted before the prefill finished")
	}
	st = e.plan()
	if st.prefillTokens != 36 {
		t.Fatalf("second prefill step: %d tokens, want 36", st.prefillTokens)
	}
	e.apply(st)
	if q.emitted.Load() != 1 {
		t.Fatalf("%d tokens after the prefill, want 1", q.emitted.Load())
	}
}

func TestPreemptionWhenBlocksRunOut(t *testing.T) {
	// Each sequence grows to ceil((8+12-1)/4) = 5 blocks; 6 cannot hold both.
	e := testEngine(Config{BlockSize: 4, NumBlocks: 6, MaxModelLen: 24})
	a := e.add(seqTokens(100, 8), 12)
	b := e.add(seqTokens(200, 8), 12)
	drain(t, e)
	if e.stats.Preemptions == 0 {
		t.Fatal("no preemption although the blocks ran out")
	}
	for _, q := range []*seq{a, b} {
		if !q.finished.Load() || q.emitted.Load() != 12 {
			t.Fatalf("seq %d: finished %v emitted %d", q.id, q.finished.Load(), q.emitted.Load())
		}
	}
	if e.pool.numFree != 6 {
		t.Fatalf("%d blocks free at the end, want 6", e.pool.numFree)
	}
}

func TestAbortFreesBlocks(t *testing.T) {
	e := testEngine(Config{BlockSize: 4, NumBlocks: 20, MaxNumSeqs: 1})
	run := e.add(seqTokens(1, 30), 50)
	wait := e.add(seqTokens(100, 30), 50)
	st := e.plan()
	if e.pool.numFree == 20 || len(e.waiting) != 1 {
		t.Fatal("first sequence not admitted")
	}
	e.abort(run) // mid-step: apply must skip it
	e.abort(wait)
	e.apply(st)
	if e.pool.numFree != 20 || len(e.running) != 0 || len(e.waiting) != 0 || e.stats.Aborted != 2 {
		t.Fatalf("after abort: %d free, %d running, %d waiting, %d aborted",
			e.pool.numFree, len(e.running), len(e.waiting), e.stats.Aborted)
	}
	if run.emitted.Load() != 0 {
		t.Fatal("aborted sequence emitted")
	}
}
