package gcfloor

import (
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// goal is the runtime's heap goal for a percent (mgcpacer.go's commit):
// live + (live + roots) × p/100, at least the scaled minimum.
func goal(live, roots uint64, p int) uint64 {
	return max(uint64(runtimeHeapMinimum)*uint64(p)/100, live+(live+roots)*uint64(p)/100)
}

// TestPercentModel holds Percent to what it promises, over random heaps:
// never below GOGC; the goal reaches the floor (within the cap's rounding)
// while the live heap is under it; the goal overshoots neither the floor
// (beyond ceil's rounding) nor what GOGC alone gives.
func TestPercentModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		floor := uint64(r.Int64N(1 << 31))
		live := uint64(r.Int64N(1 << 31))
		if i%2 == 0 {
			live %= max(floor, 1) // half the cases below the floor
		}
		roots := uint64(r.Int64N(1 << 24))
		base := []int{50, 100, 200, 400}[r.IntN(4)]
		p := percentFor(floor, live, roots, base)
		if p < base {
			t.Fatalf("percentFor(%d, %d, %d, %d) = %d, below GOGC", floor, live, roots, base, p)
		}
		g, gBase := goal(live, roots, p), goal(live, roots, base)
		if live < floor && g+runtimeHeapMinimum/100 < floor {
			t.Fatalf("percentFor(%d, %d, %d, %d) = %d: goal %d under the floor", floor, live, roots, base, p, g)
		}
		if limit := max(floor+(live+roots)/100+1, gBase); g > limit {
			t.Fatalf("percentFor(%d, %d, %d, %d) = %d: goal %d over max(floor, GOGC's goal) = %d", floor, live, roots, base, p, g, limit)
		}
	}
	if got := percentFor(64<<20, 1<<20, 0, -1); got != -1 {
		t.Fatalf("GOGC off: percentFor = %d, want -1", got)
	}
	if got := percentFor(64<<20, 0, 0, 100); got != 1600 {
		t.Fatalf("unmeasured heap: percentFor = %d, want the cap 1600", got)
	}
	if got := percentFor(2<<20, 1<<20, 0, 100); got != 100 {
		t.Fatalf("floor under the runtime's minimum: percentFor = %d, want GOGC's 100", got)
	}
}

// current is the GC percent f last set.
func current(f *Floor) int { return int(f.percent.Load()) }

func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink []byte

// churn allocates n bytes of garbage in 16 KiB pieces and returns how many
// GC cycles ran meanwhile.
func churn(n int) uint64 {
	before := readUint("/gc/cycles/total:gc-cycles")
	for range n / (16 << 10) {
		sink = make([]byte, 16<<10)
	}
	sink = nil
	return readUint("/gc/cycles/total:gc-cycles") - before
}

// waitTunes waits (bounded) until the Floor has adjusted n more times.
// busy allocates garbage meanwhile, as fast as it can (the floor then
// reaches its maximum); otherwise it forces cycles with next to nothing
// allocated (the floor then falls away).
func waitTunes(t *testing.T, f *Floor, n int64, busy bool) {
	t.Helper()
	want := f.tunes.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for f.tunes.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the floor adjusted %d times in 10s, want %d (GC cycles %d, cleanups queued %d, executed %d)",
				f.tunes.Load(), want, readUint("/gc/cycles/total:gc-cycles"),
				readUint("/gc/cleanups/queued:cleanups"), readUint("/gc/cleanups/executed:cleanups"))
		}
		if busy {
			for range 64 {
				sink = make([]byte, 16<<10)
			}
			continue
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	sink = nil
}

// startBusy starts a Floor of at most maxBytes, allocates until it has
// adjusted twice and checks that it raised the percent over GOGC's (the
// test binary's live heap is small); it returns the Floor and GOGC.
func startBusy(t *testing.T, maxBytes uint64) (*Floor, int) {
	t.Helper()
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	f := Start(maxBytes)
	t.Cleanup(f.Close)
	expectAbove(t, f, "busy", base)
	return f, base
}

// expectAbove allocates until f has adjusted twice more and the percent
// is above base. The floor follows the allocation rate measured between
// two cycles, and on a loaded machine (other test binaries sharing the
// CPUs, the race detector) one interval's rate can be too low to lift the
// goal past GOGC's by the floor's 1/8 step: it then waits for further
// cycles, for at most 10 s.
func expectAbove(t *testing.T, f *Floor, when string, base int) {
	t.Helper()
	waitTunes(t, f, 2, true)
	deadline := time.Now().Add(10 * time.Second)
	for current(f) <= base {
		if time.Now().After(deadline) {
			t.Fatalf("%s: percent %d over a small heap after %d adjustments, want above %d", when, current(f), f.tunes.Load(), base)
		}
		waitTunes(t, f, 1, true)
	}
}

// TestFloorCutsCycles: the same garbage costs far fewer cycles with the
// floor than at plain GOGC over this test's small live heap.
func TestFloorCutsCycles(t *testing.T) {
	const garbage = 512 << 20
	runtime.GC()
	plain := churn(garbage)

	f, _ := startBusy(t, 64<<20)
	// The floor is a quarter second of this loop's allocation (hundreds
	// of MiB a second, less under -race), at most 64 MiB.
	if g := readUint("/gc/heap/goal:bytes"); g < 16<<20 || g > 68<<20 {
		t.Fatalf("heap goal %d MiB with a floor of up to 64 MiB, want 16-68", g>>20)
	}
	floored := churn(garbage)
	// 512 MiB over a 16-64 MiB goal is 8-32 cycles; at plain GOGC the goal
	// is a few MiB, so well over 100.
	if floored > 40 || plain < 3*floored {
		t.Fatalf("cycles for %d MiB of garbage: %d plain, %d with the floor", garbage>>20, plain, floored)
	}
	t.Logf("cycles for %d MiB of garbage: %d plain, %d with a floor of up to 64 MiB (percent %d)", garbage>>20, plain, floored, current(f))
}

// TestFloorStepsAsideOverLargeHeap: once the live heap passes the floor
// the percent is GOGC's again, and it rises again when the heap shrinks.
func TestFloorStepsAsideOverLargeHeap(t *testing.T) {
	f, base := startBusy(t, 16<<20)
	held := make([][]byte, 0, 48)
	for range 48 {
		held = append(held, make([]byte, 1<<20))
	}
	waitTunes(t, f, 2, true)
	if current(f) != base {
		t.Fatalf("percent %d with 48 MiB live over a 16 MiB floor, want GOGC's %d", current(f), base)
	}
	runtime.KeepAlive(held)
	held = nil
	expectAbove(t, f, "after the heap shrank", base)
}

// TestTargetModel: the floor is Interval's worth of allocation at the
// measured rate, never above the maximum, and nothing without a rate.
func TestTargetModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		maxFloor := uint64(r.Int64N(1 << 34))
		allocated := uint64(r.Int64N(1 << 34))
		elapsed := time.Duration(r.Int64N(int64(10 * time.Second)))
		got := target(maxFloor, allocated, elapsed)
		if got > maxFloor {
			t.Fatalf("target(%d, %d, %v) = %d, above the maximum", maxFloor, allocated, elapsed, got)
		}
		if elapsed == 0 {
			if got != 0 {
				t.Fatalf("target(%d, %d, 0) = %d, want 0", maxFloor, allocated, got)
			}
			continue
		}
		want := float64(allocated) * Interval.Seconds() / elapsed.Seconds()
		if got < maxFloor && (float64(got) > want+1 || float64(got) < want-1-want*1e-9) {
			t.Fatalf("target(%d, %d, %v) = %d, want %.0f", maxFloor, allocated, elapsed, got, want)
		}
		if more := target(maxFloor, allocated+1<<20, elapsed); more < got {
			t.Fatalf("target fell from %d to %d with more allocated", got, more)
		}
	}
}

// TestFloorFollowsRate: a process that stops allocating gets GOGC's
// percent back (no floor to fault in for nothing), and a busy one gets the
// floor again.
func TestFloorFollowsRate(t *testing.T) {
	f, base := startBusy(t, 64<<20)
	waitTunes(t, f, 3, false)
	if current(f) != base {
		t.Fatalf("quiet: percent %d, want GOGC's %d", current(f), base)
	}
	expectAbove(t, f, "busy again", base)
}

// TestBackstopWithoutCleanups: with no cleanup ever run (the runtime does
// not promise to run them), the backstop alone still follows the rate
// both ways, one adjustment per cycle.
func TestBackstopWithoutCleanups(t *testing.T) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	f := start(64<<20, 20*time.Millisecond, false)
	t.Cleanup(f.Close)
	expectAbove(t, f, "busy, backstop only", base)
	waitTunes(t, f, 3, false)
	if current(f) != base {
		t.Fatalf("quiet, backstop only: percent %d, want GOGC's %d", current(f), base)
	}
	// No cycle, no adjustment: the backstop does not re-tune an unchanged heap.
	tunes := f.tunes.Load()
	time.Sleep(100 * time.Millisecond)
	if got := f.tunes.Load(); got > tunes+1 { // one cycle may still end on its own
		t.Fatalf("%d adjustments in 100 ms without forced cycles", got-tunes)
	}
}

// TestCloseRestoresGOGC: Close puts the starting percent back and stops
// adjusting; a second Close is harmless.
func TestCloseRestoresGOGC(t *testing.T) {
	prev := debug.SetGCPercent(150)
	defer debug.SetGCPercent(prev)
	f, _ := startBusy(t, 64<<20)
	f.Close()
	f.Close()
	if got := readUint("/gc/gogc:percent"); got != 150 {
		t.Fatalf("GOGC after Close = %d, want 150", got)
	}
	tunes := f.tunes.Load()
	for range 5 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	if got := readUint("/gc/gogc:percent"); got != 150 || f.tunes.Load() != tunes {
		t.Fatalf("after Close and 5 cycles: GOGC %d, %d more adjustments", got, f.tunes.Load()-tunes)
	}
}

// TestInert: a zero floor and GOGC=off leave the percent alone.
func TestInert(t *testing.T) {
	prev := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(prev)
	f := Start(64 << 20)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GOGC=off became %d", got)
	}
	f.Close()
	if got := debug.SetGCPercent(100); got != -1 {
		t.Fatalf("Close of an inert floor set GOGC to %d", got)
	}
	f = Start(0)
	f.Close()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("zero floor changed GOGC to %d", got)
	}
}
