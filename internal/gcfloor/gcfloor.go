// Package gcfloor gives the garbage collector a heap floor that follows
// the allocation rate: under load the collector runs about every Interval
// instead of every couple of MiB allocated.
//
// Go's collector aims each cycle at live + (live + roots) × GOGC/100 bytes,
// with a 4 MiB minimum. A gateway's live heap at moderate load is a few MiB
// (listeners, config, metrics, the open connections) while it allocates
// ~10 KiB per request, so at the default GOGC it collects every couple of
// hundred requests and every cycle marks the whole live heap again: about
// a tenth of the edge's CPU at 32 concurrent requests (docs/performance.md).
//
// The floor is what the process allocates in Interval at the rate of the
// last cycle, at most the configured maximum: the heap goal is the larger
// of it and GOGC's own goal. A busy process thus collects a few times a
// second; a quiet one keeps GOGC's small heap (a fixed floor would make
// even an idle process walk through, and fault in, that much fresh memory
// before its first collection); a large live heap (thousands of held
// streams) has a GOGC goal above any floor, and nothing changes.
//
// It works by setting the GC percent after each cycle from that cycle's
// figures (runtime/metrics), never below the percent the process started
// with (GOGC, default 100). A cleanup on an object that dies each cycle
// reports the cycle's end at once; the runtime does not promise to run
// cleanups, so a goroutine also checks every Backstop for a cycle that
// ended unadjusted (a stale percent over a grown live heap would let the
// heap grow by that percent). GOMEMLIMIT keeps its meaning: the runtime
// collects as the limit nears, whatever the percent. With GOGC=off the
// floor does nothing.
package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how long the floor lets allocation run between collections
// under load: at most a few per second, each a few milliseconds of marking
// over a small live heap, keeps the collector near 1 % of a busy CPU.
const Interval = 250 * time.Millisecond

// Backstop is how often the Floor checks for a GC cycle that ended without
// an adjustment, in case a cleanup is late or never runs.
const Backstop = 4 * Interval

// runtimeHeapMinimum is the runtime's minimum heap goal at GOGC=100
// (defaultHeapMinimum). The runtime scales it with the percent, so a
// percent above floor/runtimeHeapMinimum × 100 would raise the minimum
// goal past the floor; percentFor never sets one.
const runtimeHeapMinimum = 4 << 20

// Metric names read after each cycle, in Floor.samples order.
var metricNames = []string{
	"/gc/heap/live:bytes",
	"/gc/scan/stack:bytes",
	"/gc/scan/globals:bytes",
	"/gc/heap/allocs:bytes",
	"/gc/cycles/total:gc-cycles",
}

// Floor keeps the heap goal at or above what Interval's allocation needs,
// up to a maximum. The zero value is not usable; Start returns one. Close
// undoes it.
type Floor struct {
	maxFloor uint64
	// base is the GC percent the process had at Start; the floor never
	// sets a lower one and Close restores it. Negative: GC off, and the
	// Floor is inert.
	base int

	stopped atomic.Bool
	// percent is the GC percent last set (base until the first cycle).
	percent atomic.Int64
	// tunes counts completed adjustments (tests wait on it).
	tunes atomic.Int64

	// stop ends the backstop goroutine, which closes done as it returns
	// (both nil for an inert Floor).
	stop, done chan struct{}

	mu sync.Mutex // guards the fields below, and orders SetGCPercent with Close
	// samples is reused for every read (cleanups may run concurrently).
	samples []metrics.Sample
	// lastAllocs and lastAt are the allocation counter and the time of the
	// previous adjustment: the rate is measured between adjustments.
	lastAllocs uint64
	lastAt     time.Time
	// lastCycles is the GC cycle count at the previous adjustment: a cycle
	// is adjusted for once, by its cleanup or by the backstop.
	lastCycles uint64
}

// sentinel is allocated once per GC cycle and left unreachable: its
// cleanup runs after the cycle that collects it, which is how the Floor
// learns at once that a cycle ended (the backstop's tick only bounds how
// late it can be, should the cleanup not run). The pointer
// field keeps it out of the tiny allocator, whose blocks are freed (and
// cleaned up) only when every object in them is dead.
type sentinel struct {
	_ *byte
	_ uintptr
}

// Start keeps a floor of at most maxBytes after every GC cycle until
// Close. A zero maximum, or GOGC=off, gives an inert Floor (Close still
// safe). The GC percent is process-wide: one Floor per process (main's).
func Start(maxBytes uint64) *Floor { return start(maxBytes, Backstop, true) }

// start is Start with the backstop's period and, for tests that stand in
// for a runtime that never runs the cleanup, without the cleanup chain.
func start(maxBytes uint64, backstop time.Duration, chain bool) *Floor {
	f := &Floor{maxFloor: maxBytes, samples: make([]metrics.Sample, len(metricNames))}
	for i, name := range metricNames {
		f.samples[i].Name = name
	}
	// SetGCPercent is the only way to read the percent without
	// runtime/metrics' uint64 (which cannot say "off"); it is put back at
	// once.
	f.base = debug.SetGCPercent(100)
	debug.SetGCPercent(f.base)
	f.percent.Store(int64(f.base))
	if maxBytes == 0 || f.base < 0 {
		f.stopped.Store(true)
		return f
	}
	f.tune()
	if chain {
		f.arm()
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	// Owner: the Floor. Stops when Close closes stop.
	go f.backstop(backstop)
	return f
}

// backstop adjusts for any cycle the cleanup chain has not reported by the
// next tick; with the chain working, tune finds nothing new and returns.
func (f *Floor) backstop(every time.Duration) {
	defer close(f.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.tune()
		}
	}
}

// arm allocates the next sentinel. The cleanup holds the Floor, never the
// sentinel, so the sentinel dies at the next cycle.
func (f *Floor) arm() {
	runtime.AddCleanup(new(sentinel), func(f *Floor) {
		if f.stopped.Load() {
			return
		}
		f.tune()
		f.arm()
	}, f)
}

// tune sets the percent that puts the goal at the floor, from the last
// cycle's live heap and roots and the allocation rate since the previous
// adjustment.
func (f *Floor) tune() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() {
		return
	}
	// Read under the lock: a concurrent cleanup cannot then measure a
	// negative interval.
	now := time.Now()
	metrics.Read(f.samples)
	cycles := sampleUint(f.samples[4])
	if !f.lastAt.IsZero() && cycles == f.lastCycles {
		return // no cycle ended since the last adjustment
	}
	f.lastCycles = cycles
	live, roots := sampleUint(f.samples[0]), sampleUint(f.samples[1])+sampleUint(f.samples[2])
	allocs := sampleUint(f.samples[3])
	var floor uint64
	if !f.lastAt.IsZero() && allocs >= f.lastAllocs {
		floor = target(f.maxFloor, allocs-f.lastAllocs, now.Sub(f.lastAt))
	}
	f.lastAllocs, f.lastAt = allocs, now
	p := percentFor(floor, live, roots, f.base)
	// Only a change worth a call: the goal moves by less than 1/8 otherwise.
	if cur := int(f.percent.Load()); p != cur && (p < cur-cur/8 || p > cur+cur/8 || p == f.base) {
		debug.SetGCPercent(p)
		f.percent.Store(int64(p))
	}
	f.tunes.Add(1)
}

func sampleUint(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// target is the floor for a process that allocated this many bytes in
// elapsed: Interval's worth at that rate, at most maxFloor.
func target(maxFloor, allocated uint64, elapsed time.Duration) uint64 {
	if elapsed <= 0 {
		return 0
	}
	t := float64(allocated) * float64(Interval) / float64(elapsed)
	if t >= float64(maxFloor) {
		return maxFloor
	}
	return uint64(t)
}

// percentFor is the GC percent whose goal, live + (live + roots) × p/100,
// is the floor. It is never below base, and never above the percent at
// which the runtime's own minimum goal (4 MiB × p/100) would pass the
// floor: over a tiny live heap that cap is what holds the goal at the
// floor.
func percentFor(floor, live, roots uint64, base int) int {
	if base < 0 || live >= floor {
		return base
	}
	// An unmeasured heap (live 0 before the first cycle) counts as one
	// byte: the cap then sets the goal, and the next cycle corrects it.
	p := math.Ceil(float64(floor-live) * 100 / float64(max(live+roots, 1)))
	capped := float64(floor) * 100 / runtimeHeapMinimum
	return max(base, int(min(p, capped)))
}

// Close stops adjusting, puts back the percent the process started with
// and waits for the backstop goroutine. Safe to call more than once and on
// an inert Floor.
func (f *Floor) Close() {
	f.mu.Lock()
	if f.stopped.Swap(true) {
		f.mu.Unlock()
		return
	}
	// Under mu: a tune that runs later sees stopped and sets nothing.
	debug.SetGCPercent(f.base)
	f.percent.Store(int64(f.base))
	f.mu.Unlock()
	if f.stop != nil {
		close(f.stop) // not under mu: the goroutine may be waiting for it in tune
		<-f.done
	}
}
