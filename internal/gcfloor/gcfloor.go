// Package gcfloor gives the garbage collector a heap floor: the heap goal is
// the larger of the floor and what GOGC alone gives.
//
// Go's collector aims each cycle at live + (live + roots) × GOGC/100 bytes,
// with a 4 MiB minimum. A gateway's live heap at moderate load is a few MiB
// (listeners, config, metrics, the open connections) while it allocates
// ~10 KiB per request, so at the default GOGC it collects every couple of
// hundred requests and every cycle marks the whole live heap again: about
// a tenth of the edge's CPU at 32 concurrent requests (docs/performance.md).
// With a floor the collector waits until floor bytes are in use while the
// live heap is small; once GOGC's own goal exceeds the floor (thousands of
// held streams), nothing changes, so the floor adds at most its own size to
// the process's memory.
//
// It works by setting the GC percent after each cycle from that cycle's
// figures (runtime/metrics), never below the percent the process started
// with (GOGC, default 100). GOMEMLIMIT keeps its meaning: the runtime
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
)

// runtimeHeapMinimum is the runtime's minimum heap goal at GOGC=100
// (defaultHeapMinimum). The runtime scales it with the percent, so a
// percent above floor/runtimeHeapMinimum × 100 would raise the minimum
// goal past the floor; Percent never sets one.
const runtimeHeapMinimum = 4 << 20

// Metric names read after each cycle.
const (
	metricLive    = "/gc/heap/live:bytes"
	metricStacks  = "/gc/scan/stack:bytes"
	metricGlobals = "/gc/scan/globals:bytes"
)

// Floor keeps the heap goal at or above a number of bytes. The zero value
// is not usable; Start returns one. Close undoes it.
type Floor struct {
	floor uint64
	// base is the GC percent the process had at Start; the floor never
	// sets a lower one and Close restores it. Negative: GC off, and the
	// Floor is inert.
	base int

	stopped atomic.Bool
	// percent is the GC percent last set (base until the first cycle).
	percent atomic.Int64
	// tunes counts completed adjustments (tests wait on it).
	tunes atomic.Int64

	mu sync.Mutex // guards samples, and orders SetGCPercent calls with Close
	// samples is reused for every read (cleanups may run concurrently).
	samples []metrics.Sample
}

// sentinel is allocated once per GC cycle and left unreachable: its
// cleanup runs after the cycle that collects it, which is how the Floor
// learns that a cycle ended without a goroutine of its own. The pointer
// field keeps it out of the tiny allocator, whose blocks are freed (and
// cleaned up) only when every object in them is dead.
type sentinel struct {
	_ *byte
	_ uintptr
}

// Start sets the floor in bytes and keeps it after every GC cycle until
// Close. A zero floor, or GOGC=off, gives an inert Floor (Close still
// safe).
func Start(floorBytes uint64) *Floor {
	f := &Floor{floor: floorBytes, samples: []metrics.Sample{{Name: metricLive}, {Name: metricStacks}, {Name: metricGlobals}}}
	// SetGCPercent is the only way to read the percent without
	// runtime/metrics' uint64 (which cannot say "off"); it is put back at
	// once.
	f.base = debug.SetGCPercent(100)
	debug.SetGCPercent(f.base)
	f.percent.Store(int64(f.base))
	if floorBytes == 0 || f.base < 0 {
		f.stopped.Store(true)
		return f
	}
	f.tune()
	f.arm()
	return f
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
// cycle's live heap and roots.
func (f *Floor) tune() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() {
		return
	}
	metrics.Read(f.samples)
	p := Percent(f.floor, sampleUint(f.samples[0]), sampleUint(f.samples[1])+sampleUint(f.samples[2]), f.base)
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

// Percent is the GC percent whose goal, live + (live + roots) × p/100, is
// the floor. It is never below base, and never above the percent at which
// the runtime's own minimum goal (4 MiB × p/100) would pass the floor:
// over a tiny live heap that cap is what holds the goal at the floor.
// Exported for its model test.
func Percent(floor, live, roots uint64, base int) int {
	if base < 0 || live >= floor {
		return base
	}
	// An unmeasured heap (live 0 before the first cycle) counts as one
	// byte: the cap then sets the goal, and the next cycle corrects it.
	p := math.Ceil(float64(floor-live) * 100 / float64(max(live+roots, 1)))
	capped := float64(floor) * 100 / runtimeHeapMinimum
	return max(base, int(min(p, capped)))
}

// Current is the GC percent the Floor last set.
func (f *Floor) Current() int { return int(f.percent.Load()) }

// Close stops adjusting and puts back the percent the process started
// with. Safe to call more than once and on an inert Floor.
func (f *Floor) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(f.base)
	f.percent.Store(int64(f.base))
}
