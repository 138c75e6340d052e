// Command soak drives a steady, bounded, mixed load (streaming and
// non-streaming chat) against an in-process iop stack on loopback — one
// edge, two nodes serving the mock provider — and watches the process for
// leaks: every -interval it prints requests ok/err, RSS, Go heap,
// goroutines and open file descriptors; at the end a summary of each
// (first/last/max) and a verdict on growth. Exit status 1 when a response
// broke the contract, a lease was left behind or something kept growing.
//
//	go run ./chaos/soak -duration 10m
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

func main() {
	duration := flag.Duration("duration", 10*time.Minute, "how long to drive load")
	interval := flag.Duration("interval", 10*time.Second, "sampling interval")
	clients := flag.Int("clients", 4, "concurrent clients")
	rate := flag.Float64("rate", 20, "requests per second, all clients together (bounded)")
	churn := flag.Duration("churn", 0, "restart node b this often (0: never), to watch for leaks across reconnects")
	verbose := flag.Bool("v", false, "log edge and node warnings to stderr")
	flag.Parse()
	if *rate <= 0 || *rate > 500 || *clients <= 0 || *clients > 64 {
		fmt.Fprintln(os.Stderr, "soak: -rate must be in (0, 500] and -clients in [1, 64]")
		os.Exit(2)
	}
	os.Exit(run(*duration, *interval, *clients, *rate, *churn, *verbose))
}

func run(duration, interval time.Duration, clients int, rate float64, churn time.Duration, verbose bool) int {
	t := &shimTB{}
	defer t.cleanup()
	log := zap.NewNop()
	if verbose {
		log, _ = zap.NewDevelopment(zap.IncreaseLevel(zap.WarnLevel))
	}
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{
			{ID: "a", Token: "soak-a", Providers: []config.ProviderSpec{{Name: "m", Type: "mock", Capacity: 4, Extra: map[string]any{"delay_ms": 5}}}},
			{ID: "b", Token: "soak-b", Providers: []config.ProviderSpec{{Name: "m", Type: "mock", Capacity: 4, Extra: map[string]any{"delay_ms": 5}}}},
		},
		Models: []config.ModelSpec{{Name: "demo", QueueTimeoutSec: 30, Providers: []config.ModelProvider{
			{Node: "a", Provider: "m", Target: "x"}, {Node: "b", Provider: "m", Target: "x"},
		}}},
	}
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: log})
	stack.StartNode(t, e.NodeAddr, "a", stack.NodeOptions{Token: "soak-a", Logger: log, Interval: time.Second})
	nb := stack.StartNode(t, e.NodeAddr, "b", stack.NodeOptions{Token: "soak-b", Logger: log, Interval: time.Second})
	e.WaitReady(t, "a", 30*time.Second)
	e.WaitReady(t, "b", 30*time.Second)
	fmt.Printf("soak: edge %s, 2 mock nodes, %d clients, %.0f req/s, %s, sampling every %s, churn %s\n",
		e.URL, clients, rate, duration, interval, churn)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()

	var st stats
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	tokens := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	// Owner: run. Stops when ctx ends. Paces all clients: one token per
	// 1/rate, dropped when every client is busy (the load stays bounded).
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				close(tokens)
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				default:
				}
			}
		}
	}()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		// Owner: run. Stops when the token channel closes (ctx ended).
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))
			for range tokens {
				st.record(request(client, e.URL, rng))
			}
		}(i)
	}
	if churn > 0 {
		wg.Add(1)
		// Owner: run. Stops when ctx ends; restarts node b every churn.
		go func() {
			defer wg.Done()
			tick := time.NewTicker(churn)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					nb.Stop()
					nb = stack.StartNode(t, e.NodeAddr, "b", stack.NodeOptions{Token: "soak-b", Logger: log, Interval: time.Second})
					st.restarts.Add(1)
				}
			}
		}()
	}

	start := time.Now()
	var samples []sample
	tick := time.NewTicker(interval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			s := take(start, &st)
			samples = append(samples, s)
			fmt.Println(s)
		}
	}
	wg.Wait()
	tr.CloseIdleConnections()

	// Settle: nothing may stay leased or queued.
	settled := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if busy(e) == "" {
			settled = true
			break
		}
	}
	runtime.GC()
	final := take(start, &st)
	fmt.Println(final, "(after the load stopped and a GC)")
	return summary(samples, final, &st, settled, busy(e))
}

// --- requests -----------------------------------------------------------------

type outcome int

const (
	okOutcome  outcome = iota
	errOutcome         // an explicit error (envelope or SSE error event)
	badOutcome         // the contract was broken (wrong content, [DONE] after an error, …)
)

type stats struct {
	ok, err, bad atomic.Int64
	restarts     atomic.Int64
	mu           sync.Mutex
	firstBad     string // guarded by mu
}

func (s *stats) record(o outcome, why string) {
	switch o {
	case okOutcome:
		s.ok.Add(1)
	case errOutcome:
		s.err.Add(1)
	default:
		s.bad.Add(1)
		s.mu.Lock()
		if s.firstBad == "" {
			s.firstBad = why
		}
		s.mu.Unlock()
	}
}

// request sends one chat request (stream or not, 5..40 words) and judges
// the answer: the mock echoes the words, so a success is checked in full.
func request(c *http.Client, url string, rng *rand.Rand) (outcome, string) {
	words := make([]string, 5+rng.IntN(36))
	for i := range words {
		words[i] = "w" + strconv.FormatUint(uint64(rng.Uint32()), 36)
	}
	want := strings.Join(words, " ")
	stream := rng.IntN(2) == 0
	body, _ := json.Marshal(map[string]any{"model": "demo", "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": want}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return badOutcome, "transport: " + err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var env struct {
			Error *struct{ Code string } `json:"error"`
		}
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Code == "" || resp.StatusCode >= 500 && resp.StatusCode != 502 && resp.StatusCode != 503 {
			return badOutcome, fmt.Sprintf("status %d: %.200s", resp.StatusCode, b)
		}
		return errOutcome, ""
	}
	if !stream {
		var doc struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Choices) != 1 || doc.Choices[0].Message.Content != want {
			return badOutcome, fmt.Sprintf("non-stream 200 with a wrong body (%v)", err)
		}
		return okOutcome, ""
	}
	var got strings.Builder
	done, failed := false, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done || failed {
			return badOutcome, "event after the end of the stream: " + data
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Error   *struct{ Code string } `json:"error"`
			Choices []struct{ Delta struct{ Content string } }
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			return badOutcome, "undecodable event"
		}
		if ev.Error != nil {
			failed = true
			continue
		}
		for _, ch := range ev.Choices {
			got.WriteString(ch.Delta.Content)
		}
	}
	switch {
	case sc.Err() != nil:
		return badOutcome, "stream broke: " + sc.Err().Error()
	case failed:
		return errOutcome, ""
	case !done || got.String() != want:
		return badOutcome, "stream without [DONE] or with wrong content"
	}
	return okOutcome, ""
}

// busy describes leases or waiters still held, "" when none.
func busy(e *stack.Edge) string {
	var out []string
	st := e.Dispatcher.Status()
	for _, n := range st.Nodes {
		for _, p := range n.Providers {
			if p.InFlight != 0 || p.Queued != 0 {
				out = append(out, fmt.Sprintf("%s/%s in_flight=%d queued=%d", n.ID, p.ProviderId, p.InFlight, p.Queued))
			}
		}
	}
	for _, m := range st.Models {
		if m.Pending != 0 {
			out = append(out, fmt.Sprintf("%s pending=%d", m.Name, m.Pending))
		}
	}
	return strings.Join(out, ", ")
}

// --- sampling -----------------------------------------------------------------

type sample struct {
	elapsed             time.Duration
	ok, err, bad        int64
	rssKB, heapKB       int64
	goroutines, openFDs int
}

func (s sample) String() string {
	return fmt.Sprintf("t=%-6s ok=%-7d err=%-5d bad=%-3d rss=%6.1fMiB heap=%6.1fMiB goroutines=%-5d fds=%d",
		s.elapsed.Round(time.Second), s.ok, s.err, s.bad, float64(s.rssKB)/1024, float64(s.heapKB)/1024, s.goroutines, s.openFDs)
}

func take(start time.Time, st *stats) sample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return sample{
		elapsed: time.Since(start), ok: st.ok.Load(), err: st.err.Load(), bad: st.bad.Load(),
		rssKB: rssKB(), heapKB: int64(ms.HeapAlloc >> 10), goroutines: runtime.NumGoroutine(), openFDs: openFDs(),
	}
}

// rssKB reads VmRSS from /proc/self/status (Linux; -1 elsewhere).
func rssKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// openFDs counts /proc/self/fd (Linux; -1 elsewhere).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// summary prints first/last/max of each gauge and the verdict, and returns
// the exit status. "first" is the first sample (after one interval of
// warm-up); "last" is taken after the load stopped, everything settled and
// a GC, so growth there is what stayed behind.
func summary(samples []sample, final sample, st *stats, settled bool, left string) int {
	fmt.Printf("summary: %d ok, %d explicit errors, %d contract violations in %s (node restarts %d)\n",
		final.ok, final.err, final.bad, final.elapsed.Round(time.Second), st.restarts.Load())
	if len(samples) == 0 {
		samples = []sample{final}
	}
	first := samples[0]
	type row struct {
		name             string
		first, last, max float64
		unit             string
		grew             bool
	}
	var maxRSS, maxHeap, maxG, maxFD float64
	for _, s := range append(samples, final) {
		maxRSS, maxHeap = max(maxRSS, float64(s.rssKB)/1024), max(maxHeap, float64(s.heapKB)/1024)
		maxG, maxFD = max(maxG, float64(s.goroutines)), max(maxFD, float64(s.openFDs))
	}
	// Growth thresholds: goroutines and fds must come back to (about) where
	// the steady state started; memory may drift a little (allocator,
	// caches) but not by half again and tens of MiB.
	rows := []row{
		{"rss", float64(first.rssKB) / 1024, float64(final.rssKB) / 1024, maxRSS, "MiB",
			final.rssKB > first.rssKB*3/2 && final.rssKB-first.rssKB > 32<<10},
		{"heap", float64(first.heapKB) / 1024, float64(final.heapKB) / 1024, maxHeap, "MiB",
			final.heapKB > first.heapKB*3/2 && final.heapKB-first.heapKB > 16<<10},
		{"goroutines", float64(first.goroutines), float64(final.goroutines), maxG, "", final.goroutines > first.goroutines+10},
		{"fds", float64(first.openFDs), float64(final.openFDs), maxFD, "", final.openFDs > first.openFDs+10},
	}
	code := 0
	for _, r := range rows {
		verdict := "stable"
		if r.grew {
			verdict, code = "GROWING", 1
		}
		fmt.Printf("  %-10s first=%8.1f%s last=%8.1f%s max=%8.1f%s  %s\n", r.name, r.first, r.unit, r.last, r.unit, r.max, r.unit, verdict)
	}
	switch {
	case final.bad > 0:
		st.mu.Lock()
		fmt.Printf("verdict: FAIL: %d responses broke the contract (first: %s)\n", final.bad, st.firstBad)
		st.mu.Unlock()
		return 1
	case !settled:
		fmt.Printf("verdict: FAIL: leases or waiters left behind: %s\n", left)
		return 1
	case code != 0:
		fmt.Println("verdict: FAIL: resource growth (see GROWING above)")
		return 1
	case final.ok == 0:
		fmt.Println("verdict: FAIL: no request succeeded")
		return 1
	}
	fmt.Println("verdict: PASS: no growth in goroutines, fds or memory; every lease returned")
	return 0
}

// --- a testing.TB for internal/stack outside a test ---------------------------

// shimTB lets internal/stack (written for tests) run in this command. The
// embedded interface is nil: stack only calls the methods defined here.
type shimTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
}

func (t *shimTB) Helper()                   {}
func (t *shimTB) Name() string              { return "soak" }
func (t *shimTB) Logf(f string, a ...any)   { fmt.Fprintf(os.Stderr, "soak: "+f+"\n", a...) }
func (t *shimTB) Log(a ...any)              { fmt.Fprintln(os.Stderr, append([]any{"soak:"}, a...)...) }
func (t *shimTB) Errorf(f string, a ...any) { t.Logf(f, a...) }
func (t *shimTB) Fatalf(f string, a ...any) { t.Fatal(fmt.Sprintf(f, a...)) }

// Fatal ends the command; stack calls it only from this goroutine (setup).
func (t *shimTB) Fatal(a ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"soak: fatal:"}, a...)...)
	t.cleanup()
	os.Exit(1)
}

func (t *shimTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *shimTB) TempDir() string {
	d, err := os.MkdirTemp("", "iop-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.mu.Lock()
	t.dirs = append(t.dirs, d)
	t.mu.Unlock()
	return d
}

// cleanup runs the cleanups last-in first-out, then removes the temp dirs.
func (t *shimTB) cleanup() {
	t.mu.Lock()
	fs, dirs := t.cleanups, t.dirs
	t.cleanups, t.dirs = nil, nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}
