package stackbench

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/bench/mockup"
	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// env is one in-process deployment: mock upstream, edge, node, client.
type env struct {
	mockURL string
	edge    *stack.Edge
	client  *http.Client
}

const nodeID, token = "bench", "bench-token"

// setup starts every component under its own pprof label (proc=mock, edge,
// node), which the goroutines they start inherit; the benchmark body runs
// under proc=client.
func setup(b testing.TB) *env {
	b.Helper()
	log, err := config.Log{Level: "warn", Format: "json"}.Build()
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := mockup.Server()
	labelled("mock", func() { go func() { _ = srv.Serve(ln) }() })
	b.Cleanup(func() { _ = srv.Close() })
	mockURL := "http://" + ln.Addr().String()

	const capacity = 4096
	cfg := &config.Edge{
		Log: config.Log{Level: "warn", Format: "json"},
		Nodes: []config.NodeSpec{{ID: nodeID, Token: token, Providers: []config.ProviderSpec{
			{Name: "upstream", Type: "vllm", BaseURL: mockURL + "/v1", Capacity: capacity},
			{Name: "mock", Type: "mock", Capacity: capacity},
		}}},
		Models: []config.ModelSpec{
			{Name: "bench-tunnel", MaxQueue: 8192, Providers: []config.ModelProvider{{Node: nodeID, Provider: "upstream", Target: mockup.Model}}},
			{Name: "bench-run", MaxQueue: 8192, Providers: []config.ModelProvider{{Node: nodeID, Provider: "mock", Target: "mock-echo"}}},
		},
	}
	e := &env{mockURL: mockURL}
	labelled("edge", func() { e.edge = stack.StartEdge(b, cfg, stack.EdgeOptions{Logger: log}) })
	labelled("node", func() {
		stack.StartNode(b, e.edge.NodeAddr, nodeID, stack.NodeOptions{Token: token, Logger: log.With(zap.String("node_id", nodeID))})
	})
	e.edge.WaitReady(b, nodeID, 10*time.Second)
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

func labelled(proc string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("proc", proc), func(context.Context) { f() })
}

// body is a chat request; a stream is paced by the mock interval ms apart
// (the pacing travels in the body: the edge does not forward the mock's
// pacing headers).
func body(model string, words int, stream bool, chunks, interval int) []byte {
	s := `{"model":"` + model + `","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},` +
		`{"role":"user","content":"` + strings.TrimSpace(strings.Repeat("word ", words)) + `"}],"max_tokens":64,"temperature":0.7`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true},"` + mockup.BodyChunks + `":` + strconv.Itoa(chunks) +
			`,"` + mockup.BodyInterval + `":` + strconv.Itoa(interval)
	}
	return []byte(s + "}")
}

// post sends one request and reads the whole answer; streams must end with
// [DONE].
func (e *env) post(b *testing.B, url string, payload []byte, stream bool) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(payload))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	if !stream {
		_, _ = io.Copy(io.Discard, resp.Body)
		return
	}
	br := bufio.NewReader(resp.Body)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			done = true
		}
		if err != nil {
			break
		}
	}
	if !done {
		b.Fatal("stream ended without [DONE]")
	}
}

func bench(b *testing.B, direct bool, model string, words int, stream bool, parallel bool) {
	e := setup(b)
	url := e.edge.URL
	if direct {
		url = e.mockURL
	}
	payload := body(model, words, stream, mockup.DefaultChunks, 0) // unpaced: the relay's cost only
	e.post(b, url, payload, stream)                                // warm
	b.ReportAllocs()
	b.ResetTimer()
	labelled("client", func() {
		if !parallel {
			for b.Loop() {
				e.post(b, url, payload, stream)
			}
			return
		}
		b.SetParallelism(16) // 32 client goroutines on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e.post(b, url, payload, stream)
			}
		})
	})
}

// Non-streamed chat: the c=1 and c=32 figures of iopbench.
func BenchmarkDirect(b *testing.B)         { bench(b, true, mockup.Model, 16, false, false) }
func BenchmarkTunnel(b *testing.B)         { bench(b, false, "bench-tunnel", 16, false, false) }
func BenchmarkTunnelParallel(b *testing.B) { bench(b, false, "bench-tunnel", 16, false, true) }
func BenchmarkRun(b *testing.B)            { bench(b, false, "bench-run", 16, false, false) }

// A 32 KiB prompt (6,554 words: a chat history), not streamed: the cost
// that grows with the request (reading, validating and relaying the body).
func BenchmarkDirectLongPrompt(b *testing.B) { bench(b, true, mockup.Model, longPrompt, false, false) }
func BenchmarkTunnelLongPrompt(b *testing.B) {
	bench(b, false, "bench-tunnel", longPrompt, false, false)
}

const longPrompt = 6554 // words of 5 bytes: 32 KiB

// BenchmarkRunLongPrompt is a run (the built-in mock adapter) with a 32
// KiB system prompt of prose, line breaks and quotes escaped as a client's
// JSON encoder writes them, and a 16-word question: what the edge spends
// validating and normalizing a chat history for Ollama or an agent.
func BenchmarkRunLongPrompt(b *testing.B) {
	e := setup(b)
	var p strings.Builder
	for i := 0; p.Len() < 32<<10; i++ {
		p.WriteString(`The gateway relays every token of the answer. `)
		if i%5 == 4 {
			p.WriteString(`\n\n`)
		}
		if i%12 == 11 {
			p.WriteString(`He said \"stream it\" and left. `)
		}
	}
	payload := []byte(`{"model":"bench-run","messages":[{"role":"system","content":"` + p.String() + `"},` +
		`{"role":"user","content":"` + strings.TrimSpace(strings.Repeat("word ", 16)) + `"}],"max_tokens":64,"temperature":0.7}`)
	e.post(b, e.edge.URL, payload, false) // warm
	b.ReportAllocs()
	b.ResetTimer()
	labelled("client", func() {
		for b.Loop() {
			e.post(b, e.edge.URL, payload, false)
		}
	})
}

// Streams of 64 chunks, unpaced: per-chunk relay cost.
func BenchmarkDirectStream(b *testing.B)         { bench(b, true, mockup.Model, 64, true, false) }
func BenchmarkTunnelStream(b *testing.B)         { bench(b, false, "bench-tunnel", 64, true, false) }
func BenchmarkTunnelStreamParallel(b *testing.B) { bench(b, false, "bench-tunnel", 64, true, true) }
func BenchmarkRunStream(b *testing.B)            { bench(b, false, "bench-run", 64, true, false) }

// holdStream opens one chat stream through the edge and reads it until it
// ends or ctx is cancelled, calling opened once its first line arrived. A
// stream that failed before that returns its status (0: no answer) and
// false, without calling opened.
func holdStream(ctx context.Context, e *env, payload []byte, opened func()) (int, bool) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.edge.URL+"/v1/chat/completions", bytes.NewReader(payload))
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadSlice('\n'); err != nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, false
	}
	opened()
	_, _ = io.Copy(io.Discard, br)
	return resp.StatusCode, true
}

// TestHeldStreams holds IOPBENCH_STREAMS long-paced tunnel streams open at
// once and writes heap and goroutine profiles to IOPBENCH_PROFILE_DIR: where
// per-stream memory goes. Skipped unless IOPBENCH_STREAMS is set.
func TestHeldStreams(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IOPBENCH_STREAMS"))
	dir := os.Getenv("IOPBENCH_PROFILE_DIR")
	if n <= 0 || dir == "" {
		t.Skip("set IOPBENCH_STREAMS and IOPBENCH_PROFILE_DIR")
	}
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var open, failed, status atomic.Int64 // status: the first failed stream's (0: no answer)
	var wg sync.WaitGroup
	payload := body("bench-tunnel", 16, true, 100, 5000)
	for range n {
		wg.Add(1)
		// Owner: this test; ends when ctx is cancelled or the stream ends.
		go func() {
			defer wg.Done()
			if code, ok := holdStream(ctx, e, payload, func() { open.Add(1) }); !ok {
				status.CompareAndSwap(0, int64(code))
				failed.Add(1)
			}
		}()
	}
	stack.WaitFor(t, 60*time.Second, "streams open", func() bool { return open.Load()+failed.Load() == int64(n) })
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d streams failed (the first with status %d; 0: no answer)", f, n, status.Load())
	}
	time.Sleep(time.Second)
	runtime.GC()
	for _, p := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(dir, p+".out"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d streams open: heap in use %.1f MB, stacks %.1f MB, goroutines %d", n, float64(ms.HeapInuse)/1e6, float64(ms.StackInuse)/1e6, runtime.NumGoroutine())
	cancel()
	wg.Wait()
}
