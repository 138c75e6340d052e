package route

import (
	"testing"

	"pgregory.net/rapid"
)

// The pool simulation drives route the way the dispatcher does: a request
// gets a lease on a candidate Pick chooses among the fitting ones, else
// waits in a FIFO queue; a release hands the freed slot to the oldest
// waiter. It checks that no provider is ever over capacity, that nobody
// waits while a slot is free, that waiters are served in arrival order,
// and that every waiter is served once the leases drain.

type simRes struct {
	id       uint32
	capacity int
	inFlight int
	load     Load
}

type simReq struct {
	seq    int
	prompt []byte
	served bool
}

type simLease struct {
	res int
	req *simReq
}

type simPool struct {
	strategy Strategy
	opts     Options
	res      []*simRes
	prefixes *Prefixes
	queue    []*simReq // oldest first
	leases   []simLease
	seq      int
	lastSeq  int // seq of the last waiter served from the queue
	// scratch, reused like the dispatcher would under its lock
	fitting []int
	cands   []Candidate
	ids     []uint32
	hashes  []uint64
	match   []int
}

// simBlocks are the building blocks of prompts: a few distinct blocks, so
// prompts share prefixes often.
var simBlocks = func() [][]byte {
	out := make([][]byte, 4)
	for i := range out {
		b := make([]byte, BlockSize)
		for j := range b {
			b[j] = byte('a' + (i*7+j*13)%26)
		}
		out[i] = b
	}
	return out
}()

func genPrompt(t *rapid.T) []byte {
	blocks := rapid.SliceOfN(rapid.IntRange(0, len(simBlocks)-1), 0, 6).Draw(t, "blocks")
	var p []byte
	for _, b := range blocks {
		p = append(p, simBlocks[b]...)
	}
	return append(p, make([]byte, rapid.IntRange(0, BlockSize-1).Draw(t, "tail"))...)
}

func (s *simPool) grant(ri int, r *simReq) {
	res := s.res[ri]
	res.inFlight++
	r.served = true
	s.leases = append(s.leases, simLease{res: ri, req: r})
	s.hashes = AppendHash(s.hashes[:0], r.prompt)
	s.prefixes.Record(s.hashes, res.id)
}

func (s *simPool) acquire(t *rapid.T, prompt []byte) *simReq {
	s.seq++
	r := &simReq{seq: s.seq, prompt: prompt}
	s.fitting, s.cands, s.ids = s.fitting[:0], s.cands[:0], s.ids[:0]
	for i, res := range s.res {
		if res.inFlight < res.capacity {
			s.fitting = append(s.fitting, i)
			s.cands = append(s.cands, Candidate{InFlight: res.inFlight, Capacity: res.capacity, Load: res.load})
			s.ids = append(s.ids, res.id)
		}
	}
	s.hashes = AppendHash(s.hashes[:0], prompt)
	s.match = s.prefixes.Longest(s.match[:0], s.hashes, s.ids)
	i := Pick(s.strategy, s.cands, s.match, s.opts)
	if len(s.cands) == 0 {
		if i != -1 {
			t.Fatalf("Pick of no candidates = %d", i)
		}
		s.queue = append(s.queue, r)
		return r
	}
	if i < 0 || i >= len(s.fitting) {
		t.Fatalf("Pick = %d of %d fitting candidates", i, len(s.fitting))
	}
	if s.strategy == Ordered && i != 0 {
		t.Fatalf("ordered picked %d, not the first fitting", i)
	}
	s.grant(s.fitting[i], r)
	return r
}

func (s *simPool) release(t *rapid.T, i int) {
	l := s.leases[i]
	s.leases = append(s.leases[:i], s.leases[i+1:]...)
	s.res[l.res].inFlight--
	// The freed slot goes to the oldest waiter. It is the only fitting
	// candidate (nobody waits while another slot is free), so Pick over
	// it must choose it.
	for s.res[l.res].inFlight < s.res[l.res].capacity && len(s.queue) > 0 {
		w := s.queue[0]
		s.queue = s.queue[1:]
		res := s.res[l.res]
		s.cands = append(s.cands[:0], Candidate{InFlight: res.inFlight, Capacity: res.capacity, Load: res.load})
		if got := Pick(s.strategy, s.cands, nil, s.opts); got != 0 {
			t.Fatalf("Pick over the one freed candidate = %d", got)
		}
		if w.seq < s.lastSeq {
			t.Fatalf("waiter %d served after waiter %d", w.seq, s.lastSeq)
		}
		s.lastSeq = w.seq
		s.grant(l.res, w)
	}
}

func (s *simPool) check(t *rapid.T) {
	full := true
	for _, r := range s.res {
		if r.inFlight > r.capacity || r.inFlight < 0 {
			t.Fatalf("resource %d: %d in flight, capacity %d", r.id, r.inFlight, r.capacity)
		}
		if r.inFlight < r.capacity {
			full = false
		}
	}
	if len(s.queue) > 0 && !full {
		t.Fatalf("%d waiting while a slot is free", len(s.queue))
	}
	if s.prefixes.Len() > s.prefixes.max {
		t.Fatalf("prefix index holds %d > %d", s.prefixes.Len(), s.prefixes.max)
	}
}

func TestPoolSimulation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &simPool{
			strategy: Strategy(rapid.IntRange(0, 2).Draw(t, "strategy")),
			opts:     genOptions(t),
			prefixes: NewPrefixes(rapid.IntRange(0, 12).Draw(t, "maxEntries")),
		}
		for i := range rapid.IntRange(1, 4).Draw(t, "resources") {
			s.res = append(s.res, &simRes{id: uint32(i * 3), capacity: rapid.IntRange(1, 3).Draw(t, "cap")})
		}
		var all []*simReq
		t.Repeat(map[string]func(*rapid.T){
			"acquire": func(t *rapid.T) {
				all = append(all, s.acquire(t, genPrompt(t)))
			},
			"release": func(t *rapid.T) {
				if len(s.leases) == 0 {
					t.Skip("no lease")
				}
				s.release(t, rapid.IntRange(0, len(s.leases)-1).Draw(t, "lease"))
			},
			"report": func(t *rapid.T) {
				r := s.res[rapid.IntRange(0, len(s.res)-1).Draw(t, "res")]
				r.load = genLoad(t)
			},
			"restart": func(t *rapid.T) {
				s.prefixes.Forget(s.res[rapid.IntRange(0, len(s.res)-1).Draw(t, "res")].id)
			},
			"": s.check,
		})
		// Drain: every lease ends, oldest first; each release serves a
		// waiter if any, so the queue must empty and every waiter be served.
		for steps := 0; len(s.leases) > 0; steps++ {
			if steps > 10000 {
				t.Fatalf("leases never drain")
			}
			s.release(t, 0)
			s.check(t)
		}
		if len(s.queue) != 0 {
			t.Fatalf("%d waiters left with no lease outstanding", len(s.queue))
		}
		for _, r := range all {
			if !r.served {
				t.Fatalf("request %d never served", r.seq)
			}
		}
	})
}
