package stackbench

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
)

// TestHeldStreamMemory holds IOPBENCH_HELD (e.g. 2000) long-paced tunnel
// streams through a real edge and node over loopback and reports, per held
// stream: the heap and stack bytes in use (runtime.MemStats after a forced
// collection, the difference to one held stream, divided by the count), the
// goroutines each component (pprof label proc) keeps, and the live heap of
// the allocation sites whose stack runs through the edge's HTTP handler
// (gin's Engine.ServeHTTP, or the gateway's infoHandler around it), by site. Every allocation is recorded
// (MemProfileRate 1), so the site figures are exact, not sampled. With
// IOPBENCH_PROFILE_DIR set it also writes heap33.out (inuse_space) there.
// Skipped unless IOPBENCH_HELD is set: a measurement, not a check (the
// savings are pinned by the gateway's and nodewire's own tests).
func TestHeldStreamMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IOPBENCH_HELD"))
	if n <= 0 {
		t.Skip("set IOPBENCH_HELD to the number of streams to hold")
	}
	heldStreamMemory33(t, n)
}

// held33 is what heldStreamMemory33 measured, per held stream.
type held33 struct {
	handler    float64            // live heap bytes under the edge's handler
	sites      []site33           // the handler's sites of at least 8 B/stream, largest first
	goroutines map[string]float64 // by proc label
}

// heldStreamMemory33 holds n streams, logs the figures TestHeldStreamMemory
// describes and returns them.
func heldStreamMemory33(t *testing.T, n int) held33 {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()

	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// 100 chunks 5 s apart: every stream is idle between its first event
	// and the end of the measurement.
	payload := body("bench-tunnel", 16, true, 100, 5000)
	var open, failed atomic.Int64
	start := func(k int) {
		for range k {
			wg.Add(1)
			// Owner: this test; ends when ctx is cancelled (the client
			// gives up the stream) or the stream ends.
			go func() {
				defer wg.Done()
				if _, ok := holdStream(ctx, e, payload, func() { open.Add(1) }); !ok {
					failed.Add(1)
				}
			}()
		}
	}
	wait := func(k int64) {
		stack.WaitFor(t, 120*time.Second, "streams open", func() bool { return open.Load()+failed.Load() >= k })
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d streams failed", f)
		}
	}
	start(1)
	wait(1)
	base := snapshot33()
	start(n)
	wait(int64(n) + 1)
	held := snapshot33()

	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	t.Logf("%d held streams: heap in use %.0f B/stream, stacks %.0f B/stream, live heap %.0f B/stream",
		n, per(base.heapInuse, held.heapInuse), per(base.stackInuse, held.stackInuse), per(base.heapAlloc, held.heapAlloc))
	out := held33{goroutines: map[string]float64{}}
	for _, p := range []string{"edge", "node", "mock", "client"} {
		out.goroutines[p] = (float64(held.goroutines[p]) - float64(base.goroutines[p])) / float64(n)
		t.Logf("goroutines per stream, proc=%s: %.2f", p, out.goroutines[p])
	}
	var total int64
	sites := make([]site33, 0, len(held.sites))
	for k, b := range held.sites {
		d := b - base.sites[k]
		total += d
		if d >= int64(n)*8 {
			sites = append(sites, site33{k, d})
		}
	}
	slices.SortFunc(sites, func(a, b site33) int { return cmp.Compare(b.bytes, a.bytes) })
	out.handler, out.sites = float64(total)/float64(n), sites
	t.Logf("under the edge's handler: %.0f B/stream live", out.handler)
	for _, s := range sites {
		t.Logf("  %6.0f B/stream  %s", float64(s.bytes)/float64(n), s.key)
	}
	if dir := os.Getenv("IOPBENCH_PROFILE_DIR"); dir != "" {
		f, err := os.Create(filepath.Join(dir, "heap33.out"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

type site33 struct {
	key   string
	bytes int64
}

type snap33 struct {
	heapInuse, stackInuse, heapAlloc uint64
	goroutines                       map[string]int
	sites                            map[string]int64 // live bytes by allocation site under the edge's handler
}

// snapshot33 forces collections until the memory profile is current (it
// lags up to two cycles) and reads the runtime's figures.
func snapshot33() snap33 {
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := snap33{heapInuse: ms.HeapInuse, stackInuse: ms.StackInuse, heapAlloc: ms.HeapAlloc, goroutines: map[string]int{}, sites: map[string]int64{}}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	// debug=1: "N @ pcs..." then, for labelled goroutines, "# labels: {...}".
	count := 0
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if c, _, ok := strings.Cut(line, " @ "); ok {
			count, _ = strconv.Atoi(c)
			continue
		}
		if l, ok := strings.CutPrefix(line, "# labels: "); ok {
			for _, p := range []string{"edge", "node", "mock", "client"} {
				if strings.Contains(l, `"proc":"`+p+`"`) {
					s.goroutines[p] += count
				}
			}
		}
	}
	recs := make([]runtime.MemProfileRecord, 1<<16)
	k, ok := runtime.MemProfile(recs, false)
	for !ok {
		recs = make([]runtime.MemProfileRecord, k+1024)
		k, ok = runtime.MemProfile(recs, false)
	}
	for _, r := range recs[:k] {
		if b := r.InUseBytes(); b > 0 {
			if key, under := siteKey33(r.Stack()); under {
				s.sites[key] += b
			}
		}
	}
	return s
}

// siteKey33 names an allocation by its first frame outside the runtime
// and the first two of iop's own frames, and says whether its stack runs
// through the edge's handler (gin's router, or the gateway's wrapper
// around it).
func siteKey33(pcs []uintptr) (string, bool) {
	frames := runtime.CallersFrames(pcs)
	var leaf string
	var own []string
	under := false
	for {
		f, more := frames.Next()
		fn := f.Function
		switch {
		case strings.HasPrefix(fn, "runtime."):
		case leaf == "":
			leaf = short33(fn)
			if strings.Contains(fn, "iop-gateway/iop/") {
				own = append(own, leaf)
			}
		case strings.Contains(fn, "iop-gateway/iop/") && len(own) < 2:
			own = append(own, short33(fn))
		}
		// The edge's handler: gin's router, or the gateway's wrapper
		// around it, which allocates each request's writer and reqInfo.
		if strings.HasPrefix(fn, "github.com/gin-gonic/gin.(*Engine).ServeHTTP") || strings.HasSuffix(fn, "gateway.infoHandler.ServeHTTP") {
			under = true
		}
		if !more {
			break
		}
	}
	return leaf + " ← " + strings.Join(own, " ← "), under
}

func short33(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}
