package nodewire

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWorkerPoolReusesWaitingGoroutines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	release := make(chan struct{})
	var mu sync.Mutex
	var running, served int
	var lastID string
	p := newWorkerPool(ctx, &wg, func(*Stream) {
		mu.Lock()
		running++
		served++
		lastID = goroutineID()
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
	})
	p.maxIdle = 2
	// Counted by their stacks, not runtime.NumGoroutine: goroutines of
	// earlier tests may still be ending.
	waitFor(t, "no workers of earlier tests", func() bool { return workerGoroutines() == 0 })

	// Five streams at once: five goroutines.
	for range 5 {
		p.serve(&Stream{})
	}
	waitFor(t, "5 running", func() bool { mu.Lock(); defer mu.Unlock(); return running == 5 })
	if n := workerGoroutines(); n != 5 {
		t.Fatalf("%d goroutines for 5 streams", n)
	}
	close(release)
	// Only maxIdle of them stay to wait for more work.
	waitFor(t, "2 idle workers", func() bool { return workerGoroutines() == 2 })

	// Sequential streams reuse the waiting goroutines: they run on a
	// handful of goroutines, not one each. (A stream that arrives while a
	// worker is between its handler and its wait starts a new goroutine, so
	// the bound is loose.)
	ids := map[string]bool{}
	for i := range 20 {
		p.serve(&Stream{})
		waitFor(t, "stream served", func() bool { mu.Lock(); defer mu.Unlock(); return served == 6+i && running == 0 })
		mu.Lock()
		ids[lastID] = true
		mu.Unlock()
		waitFor(t, "workers waiting", func() bool { return p.idle.Load() == 2 })
	}
	if len(ids) > 5 {
		t.Fatalf("20 sequential streams ran on %d goroutines", len(ids))
	}
	mu.Lock()
	if served != 25 {
		t.Fatalf("served %d streams, want 25", served)
	}
	mu.Unlock()

	// Cancelling Serve's context ends the waiting workers.
	cancel()
	waitGroupWithin(t, &wg, "waiting workers did not exit on cancel")
}

func TestWorkerPoolIdleWorkersExpire(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	p := newWorkerPool(ctx, &wg, func(*Stream) {})
	p.idleAfter = 20 * time.Millisecond
	for range 3 {
		p.serve(&Stream{})
	}
	waitGroupWithin(t, &wg, "idle workers outlived workerIdle")
	if n := p.idle.Load(); n != 0 {
		t.Fatalf("idle count %d after every worker left", n)
	}
}

// waitGroupWithin fails the test with msg unless wg is done within 5 s.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, msg string) {
	t.Helper()
	done := make(chan struct{})
	// Owner: the test; ends when wg is done (a leak only if it fails).
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal(msg)
	}
}

// workerGoroutines counts the live goroutines running a workerPool's
// worker.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "nodewire.(*workerPool).worker(")
}

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
