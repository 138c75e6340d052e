//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iop-gateway/iop/bench/mockup"
)

// target is one way to reach the upstream.
type target struct {
	name        string
	url         string // base URL
	model       string // non-streamed requests
	streamModel string // paced streams
	runPath     bool   // pacing comes from the mock adapter (one delta per word, delay_ms apart)
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        0, // no overall limit
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

func words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("word")
	}
	return b.String()
}

// chatBody is a realistic chat request. The user message has n words: the
// run path's mock echoes one delta per word.
func chatBody(model string, n int, stream bool) []byte {
	s := `{"model":"` + model + `","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},` +
		`{"role":"user","content":"` + words(n) + `"}],"max_tokens":64,"temperature":0.7`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return []byte(s + "}")
}

// pacedBody is a streamed chatBody that also asks the mock for chunks
// events interval apart. The pacing travels in the body because a gateway
// forwards the body but not every header.
//
// pad bytes are added to the system message: a prompt of a realistic size
// for the memory phase (what a gateway holds of it per stream).
func pacedBody(model string, n, chunks int, interval time.Duration, pad int) []byte {
	b := chatBody(model, n, true)
	if pad > 0 {
		const at = `Answer briefly.`
		i := bytes.Index(b, []byte(at)) + len(at)
		b = slices.Concat(b[:i], bytes.Repeat([]byte(" x"), (pad+1)/2)[:pad], b[i:])
	}
	return fmt.Appendf(b[:len(b)-1], `,"%s":%d,"%s":%d}`, mockup.BodyChunks, chunks, mockup.BodyInterval, interval.Milliseconds())
}

// once performs one non-streamed request and reads the whole body.
func once(ctx context.Context, cl *http.Client, url string, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, nil
}

type latencyResult struct {
	Path    string
	N       int
	Errors  int
	Lat     summary
	samples []time.Duration
}

// merge adds another round's samples.
func (r *latencyResult) merge(o latencyResult) {
	r.Path, r.N, r.Errors = o.Path, r.N+o.N, r.Errors+o.Errors
	r.samples = append(r.samples, o.samples...)
	r.Lat = summarize(r.samples)
}

// latencyRun sends warm + n sequential requests, pausing gap before each
// (0: back to back). With a gap every process on the path is idle when a
// request arrives, so each hop includes waking it, as for light traffic or
// the first token of a stream that starts on a quiet gateway.
func latencyRun(ctx context.Context, cl *http.Client, t target, warm, n int, gap time.Duration) (latencyResult, error) {
	url := t.url + "/v1/chat/completions"
	body := chatBody(t.model, 16, false)
	r := latencyResult{Path: t.name, N: n}
	lat := make([]time.Duration, 0, n)
	for i := range warm + n {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if gap > 0 {
			time.Sleep(gap)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		d, err := once(rctx, cl, url, body)
		cancel()
		switch {
		case err != nil:
			r.Errors++
			if r.Errors > 10 {
				return r, fmt.Errorf("too many errors, last: %w", err)
			}
		case i >= warm:
			lat = append(lat, d)
		}
	}
	r.samples, r.Lat = lat, summarize(lat)
	return r, nil
}

type throughputResult struct {
	Path    string
	Conc    int
	OK      int
	Errors  int
	Elapsed time.Duration
	RPS     float64
	Lat     summary
	Use     usage
	samples []time.Duration
}

// merge adds another round: counts add up, usage is weighted.
func (r *throughputResult) merge(o throughputResult) {
	r.Use = mergeUsage(r.Use, r.OK, r.Elapsed, o.Use, o.OK, o.Elapsed)
	r.Path, r.Conc, r.OK, r.Errors, r.Elapsed = o.Path, o.Conc, r.OK+o.OK, r.Errors+o.Errors, r.Elapsed+o.Elapsed
	r.samples = append(r.samples, o.samples...)
	r.Lat = summarize(r.samples)
	r.RPS = float64(r.OK) / r.Elapsed.Seconds()
}

// mergeUsage combines two measurements: per-unit figures weighted by units
// (requests, chunks), the outside load by time.
func mergeUsage(a usage, na int, ea time.Duration, b usage, nb int, eb time.Duration) usage {
	out := usage{CPU: map[string]float64{}, Calls: map[string]float64{}}
	for _, m := range []struct{ dst, a, b map[string]float64 }{{out.CPU, a.CPU, b.CPU}, {out.Calls, a.Calls, b.Calls}} {
		for k := range m.b {
			if na+nb > 0 {
				m.dst[k] = (m.a[k]*float64(na) + m.b[k]*float64(nb)) / float64(na+nb)
			}
		}
	}
	if e := ea + eb; e > 0 {
		out.OtherPct = (a.OtherPct*ea.Seconds() + b.OtherPct*eb.Seconds()) / e.Seconds()
	}
	return out
}

func throughputRun(ctx context.Context, cl *http.Client, t target, conc int, dur time.Duration, h *harness) (throughputResult, error) {
	url := t.url + "/v1/chat/completions"
	body := chatBody(t.model, 16, false)
	r := throughputResult{Path: t.name, Conc: conc}
	// Warm-up: open the connections.
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	worker(wctx, cl, url, body, conc, nil)
	wcancel()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	rctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	start := time.Now()
	before := h.snapshot()
	per := make([][]time.Duration, conc)
	errs := worker(rctx, cl, url, body, conc, per)
	r.Elapsed = time.Since(start)
	var all []time.Duration
	for _, p := range per {
		all = append(all, p...)
	}
	r.OK, r.Errors = len(all), errs
	r.RPS = float64(r.OK) / r.Elapsed.Seconds()
	r.samples, r.Lat = all, summarize(all)
	r.Use = h.since(before, r.OK)
	if r.OK == 0 {
		return r, errors.New("no request succeeded")
	}
	return r, nil
}

// worker runs conc closed loops until ctx ends; per[i] collects loop i's
// latencies when per is non-nil. It returns the error count (requests cut
// by the end of ctx are not errors).
func worker(ctx context.Context, cl *http.Client, url string, body []byte, conc int, per [][]time.Duration) int {
	var errs atomic.Int64
	var wg sync.WaitGroup
	for i := range conc {
		wg.Add(1)
		// Owner: worker; stops when ctx ends.
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				d, err := once(ctx, cl, url, body)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				if per != nil {
					per[i] = append(per[i], d)
				}
			}
		}()
	}
	wg.Wait()
	return int(errs.Load())
}

// streamResult is what one paced stream saw.
type streamResult struct {
	ttft  time.Duration
	gaps  []time.Duration // between consecutive data lines among the first `chunks`
	lines int
	done  bool // [DONE] seen
	err   error
}

// streamOnce opens a paced stream and reads it line by line, timing each
// `data:` line. chunks/interval set the mock's pacing (direct, nginx,
// tunnel); the run path paces by words instead. The paced phase uses it
// (few streams, through net/http as a client would); the step and memory
// phases use streamLoad, which reads the same figures at a fraction of the
// cost.
func streamOnce(ctx context.Context, cl *http.Client, t target, chunks int, interval time.Duration) streamResult {
	var r streamResult
	n := mockup.DefaultChunks
	if t.runPath {
		n = chunks
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/v1/chat/completions", bytes.NewReader(pacedBody(t.streamModel, n, chunks, interval, 0)))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.err = fmt.Errorf("status %d", resp.StatusCode)
		return r
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	lineStart := true
	var last time.Time
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && lineStart && bytes.HasPrefix(line, []byte("data:")) {
			now := time.Now()
			r.lines++
			if r.lines == 1 {
				r.ttft = now.Sub(start)
			} else if r.lines <= chunks {
				r.gaps = append(r.gaps, now.Sub(last))
			}
			last = now
			if bytes.HasPrefix(bytes.TrimSpace(line[5:]), []byte("[DONE]")) {
				r.done = true
			}
		}
		switch {
		case err == nil:
			lineStart = true
		case errors.Is(err, bufio.ErrBufferFull):
			lineStart = false
		case errors.Is(err, io.EOF):
			if !r.done {
				r.err = errors.New("stream ended without [DONE]")
			}
			return r
		default:
			r.err = err
			return r
		}
	}
}

type pacedResult struct {
	Path       string
	N          int
	Errors     int
	TTFT       summary
	Gap        summary
	Use        usage // per data line
	lines      int
	elapsed    time.Duration
	ttft, gaps []time.Duration
}

func (r *pacedResult) merge(o pacedResult) {
	r.Use = mergeUsage(r.Use, r.lines, r.elapsed, o.Use, o.lines, o.elapsed)
	r.lines, r.elapsed = r.lines+o.lines, r.elapsed+o.elapsed
	r.Path, r.N, r.Errors = o.Path, r.N+o.N, r.Errors+o.Errors
	r.ttft, r.gaps = append(r.ttft, o.ttft...), append(r.gaps, o.gaps...)
	r.TTFT, r.Gap = summarize(r.ttft), summarize(r.gaps)
}

func pacedRun(ctx context.Context, h *harness, cl *http.Client, t target, n int, stagger time.Duration) (pacedResult, error) {
	before := h.snapshot()
	res := runStreams(ctx, cl, t, n, time.Duration(n)*stagger, mockup.DefaultChunks, pacing, 30*time.Second)
	r := pacedResult{Path: t.name, N: n, elapsed: time.Since(before.at)}
	var ttft, gaps []time.Duration
	for _, s := range res {
		r.lines += s.lines
	}
	r.Use = h.since(before, r.lines)
	for _, s := range res {
		if s.err != nil {
			r.Errors++
			continue
		}
		ttft = append(ttft, s.ttft)
		gaps = append(gaps, s.gaps...)
	}
	r.ttft, r.gaps = ttft, gaps
	r.TTFT, r.Gap = summarize(ttft), summarize(gaps)
	if r.Errors > 0 {
		return r, fmt.Errorf("%d of %d streams failed, e.g. %v", r.Errors, n, firstErr(res))
	}
	return r, ctx.Err()
}

func firstErr(res []streamResult) error {
	for _, s := range res {
		if s.err != nil {
			return s.err
		}
	}
	return nil
}

// runStreams starts n streams evenly over ramp and waits for them all
// (bounded by ramp + the streams' own length + slack).
func runStreams(ctx context.Context, cl *http.Client, t target, n int, ramp time.Duration, chunks int, interval time.Duration, slack time.Duration) []streamResult {
	length := time.Duration(chunks) * interval
	sctx, cancel := context.WithTimeout(ctx, ramp+length+slack)
	defer cancel()
	res := make([]streamResult, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(ramp * time.Duration(i) / time.Duration(n))); d > 0 {
			select {
			case <-sctx.Done():
			case <-time.After(d):
			}
		}
		if sctx.Err() != nil {
			res[i].err = sctx.Err()
			continue
		}
		wg.Add(1)
		// Owner: runStreams; bounded by sctx.
		go func() {
			defer wg.Done()
			res[i] = streamOnce(sctx, cl, t, chunks, interval)
		}()
	}
	wg.Wait()
	return res
}

type stepResult struct {
	Path     string
	Passed   int // highest step with no gap above maxGap and no failure
	FailedAt int // first failing step, 0 when none failed
	// Unmeasured is the first step not run because the path's process
	// would need more descriptors than RLIMIT_NOFILE (0: none): above it
	// the step would measure refused connections, not the path.
	Unmeasured int
	Why        string        // why it failed or was not run
	MaxGap     time.Duration // at the highest passing step
	Tried      []string      // per step: "N: max gap, p99 ttft, errors"
	Points     []stepPoint   // per attempt, in the order run
}

// stepPoint is one attempt at one step.
type stepPoint struct {
	N      int
	OK     bool
	GapP99 time.Duration
	// GatewayCPU is the gateway's CPU µs per streamed chunk (edge+node for
	// tunnel and run, the proxy for nginx and goproxy); 0 for direct.
	GatewayCPU float64
}

// descriptors is about how many file descriptors n concurrent streams on
// path cost its busiest process: a one-hop proxy (nginx, goproxy) holds a
// client and an upstream socket per stream, every other process one.
func descriptors(path string, n int) uint64 {
	per := 1
	if path == "nginx" || path == "goproxy" {
		per = 2
	}
	return uint64(per*n + 64)
}

// stepRun raises the number of concurrent paced streams step by step until
// one step has a gap above maxGap or a failed stream. Every step's streams
// overlap for at least p.stepHold.
func stepRun(ctx context.Context, h *harness, t target, p plan) stepResult {
	r := stepResult{Path: t.name}
	for _, n := range p.steps {
		if need := descriptors(t.name, n); h.env.Nofile > 0 && need > h.env.Nofile {
			r.Unmeasured = n
			r.Why = fmt.Sprintf("needs ~%d descriptors in one process, RLIMIT_NOFILE is %d", need, h.env.Nofile)
			break
		}
		passed := false
		for try := 1; try <= p.stepTries && !passed && ctx.Err() == nil; try++ {
			ok, line, why, gmax, pt := stepOnce(ctx, h, t, p, n)
			if pt.N > 0 {
				r.Points = append(r.Points, pt)
			}
			if try > 1 {
				line = fmt.Sprintf("%s (attempt %d)", line, try)
			}
			r.Tried = append(r.Tried, line)
			if ok {
				passed, r.Passed, r.MaxGap = true, n, gmax
			} else {
				r.Why = why
			}
			time.Sleep(time.Second) // let connections close before the next attempt
		}
		if !passed {
			if ctx.Err() == nil {
				r.FailedAt = n
			}
			break
		}
	}
	return r
}

// stepOnce runs n concurrent paced streams once.
func stepOnce(ctx context.Context, h *harness, t target, p plan, n int) (ok bool, line, why string, gmax time.Duration, pt stepPoint) {
	ramp := max(time.Duration(n)*time.Second/time.Duration(p.rampRate), 200*time.Millisecond)
	chunks := int((ramp + p.stepHold) / pacing)
	logf("concurrent paced streams: %s, %d streams (ramp %s, %d chunks)", t.name, n, ramp, chunks)
	addr, req, err := streamRequest(t, chunks, pacing, 0)
	if err != nil {
		return false, fmt.Sprintf("%d: %v", n, err), err.Error(), 0, pt
	}
	before := h.snapshot()
	res, err := runStreamLoad(ctx, loadSpec{addr: addr, req: req, n: n, ramp: ramp, chunks: chunks, gaps: true,
		timeout: ramp + time.Duration(chunks)*pacing + 30*time.Second})
	if err != nil {
		return false, fmt.Sprintf("%d: %v", n, err), err.Error(), 0, pt
	}
	lines := 0
	for _, s := range res {
		lines += s.lines
	}
	use := h.since(before, lines)
	var ttft, gaps []time.Duration
	errs := 0
	for _, s := range res {
		if s.err != nil {
			errs++
			continue
		}
		ttft = append(ttft, s.ttft)
		gaps = append(gaps, s.gaps...)
	}
	ts, gs := summarize(ttft), summarize(gaps)
	gmax = gs.Max
	// The harness's own cost (mock + load generator, both on the load CPU)
	// is shown on every path: it bounds the step a path can pass.
	cpu := fmt.Sprintf(", mock+loadgen %.1f+%.1f µs CPU per chunk", use.CPU["mock"], use.CPU["loadgen"])
	pt = stepPoint{N: n, GapP99: gs.P99}
	switch t.name {
	case "nginx", "goproxy":
		pt.GatewayCPU = use.CPU[t.name]
		cpu += fmt.Sprintf(", %s %.1f µs CPU per chunk", t.name, pt.GatewayCPU)
	case "tunnel", "run":
		pt.GatewayCPU = use.CPU["edge"] + use.CPU["node"]
		cpu += fmt.Sprintf(", edge+node %.1f µs CPU per chunk", pt.GatewayCPU)
	}
	// The gap p99 shows how the chunks arrived: near the pacing, or in
	// bursts (a p99 far above it) once the mock coalesces the due chunks of
	// a stream because the load CPU is saturated.
	line = fmt.Sprintf("%d: max gap %s, gap p99 %s, TTFT p99 %s, %d failed%s", n, ms(gmax), ms(gs.P99), ms(ts.P99), errs, cpu)
	if errs > 0 || gmax > maxGap {
		why = fmt.Sprintf("max gap %s, %d of %d streams failed", ms(gmax), errs, n)
		if e := firstErr(res); e != nil {
			why += fmt.Sprintf(" (e.g. %v)", e)
		}
		return false, line, why, gmax, pt
	}
	pt.OK = true
	return true, line, "", gmax, pt
}

type holdResult struct {
	Path      string // whose streams: tunnel or goproxy
	Label     string
	Want      int
	Open      int // streams that delivered a first chunk and were still open at the sample
	Failed    int
	EdgeKB    int64
	NodeKB    int64
	GoproxyKB int64
	FloorKB   int64 // the plain net/http server
	MockKB    int64
	LoadKB    int64
	Ramp      time.Duration
	Skipped   bool // not measured; Note says why
	Note      string
}

func (h *harness) holdSample(path, label string, want int, open *atomic.Int64) holdResult {
	r := holdResult{Path: path, Label: label, Want: want}
	for range 3 {
		r.EdgeKB = max(r.EdgeKB, rssKB(h.edge))
		r.NodeKB = max(r.NodeKB, rssKB(h.node))
		r.GoproxyKB = max(r.GoproxyKB, rssKB(h.goproxy))
		r.FloorKB = max(r.FloorKB, rssKB(h.floor))
		r.MockKB = max(r.MockKB, rssKB(h.mock))
		r.LoadKB = max(r.LoadKB, selfRSS())
		if open != nil {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if open != nil {
		r.Open = int(open.Load())
	}
	return r
}

func selfRSS() int64 { return rssOfPID("self") }

// holdRun opens n long-paced streams on t (tunnel or goproxy), waits until
// all of them have delivered their first chunk (so all are open at once),
// samples RSS, and cancels them.
func holdRun(ctx context.Context, h *harness, t target, n int, p plan) holdResult {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := 600 // 600 × the pacing: far longer than the hold; cancelled below
	ramp := time.Duration(n) * time.Second / time.Duration(p.rampRate)
	r := holdResult{Path: t.name, Label: fmt.Sprintf("%d streams", n), Want: n, Ramp: ramp}
	addr, req, err := streamRequest(t, chunks, p.holdInterval, p.holdPrompt)
	if err != nil {
		r.Note = err.Error()
		return r
	}
	var open, failed atomic.Int64
	done := make(chan error, 1)
	// Owner: holdRun; ends when hctx is cancelled (the loop then closes
	// every connection).
	go func() {
		_, err := runStreamLoad(hctx, loadSpec{addr: addr, req: req, n: n, ramp: ramp, chunks: chunks, open: &open, failed: &failed})
		done <- err
	}()
	// Wait (bounded) until every stream is open or has failed.
	deadline := time.Now().Add(ramp + 60*time.Second)
	for int(open.Load()+failed.Load()) < n && time.Now().Before(deadline) && hctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a couple of chunks on every stream
	r = h.holdSample(t.name, r.Label, n, &open)
	r.Failed = int(failed.Load())
	r.Ramp = ramp
	if r.Open < n {
		r.Note = fmt.Sprintf("only %d of %d streams open (%d failed)", r.Open, n, r.Failed)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			r.Note += "; load generator: " + err.Error()
		}
	case <-time.After(60 * time.Second):
		r.Note += "; streams did not all end within 60s of cancel"
	}
	time.Sleep(3 * time.Second) // let the gateway release what it held
	return r
}
