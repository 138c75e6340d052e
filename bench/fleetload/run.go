package fleetload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors a request can end with (wrapped with details).
var (
	ErrStatus    = errors.New("fleetload: non-200 status")
	ErrTruncated = errors.New("fleetload: stream ended before [DONE]")
)

// Summary is a latency distribution (nearest-rank percentiles).
type Summary struct {
	N                   int
	Mean, P50, P90, P99 time.Duration
	Max                 time.Duration
}

func summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(d))+0.999999) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return Summary{N: len(d), Mean: sum / time.Duration(len(d)), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: d[len(d)-1]}
}

// Result is one run's report.
type Result struct {
	Requests           int            // requests answered in full
	Errors             int            // requests failed (status, transport, truncated stream)
	Skipped            int            // turns not sent because an earlier turn of their conversation failed
	Elapsed            time.Duration  // wall time of the run
	TTFT               Summary        // request start to the first non-empty content delta
	Latency            Summary        // request start to [DONE]
	PromptTokens       int64          // from the usage chunks
	OutputTokens       int64          // from the usage chunks (content chunks when absent)
	OutputTokensPerSec float64        // OutputTokens / Elapsed
	RequestsPerSec     float64        // Requests / Elapsed
	PerTarget          map[string]int // requests sent per base URL
	FirstErrors        []string       // up to 5 error messages, for diagnosis
}

// String is a one-line report.
func (r Result) String() string {
	return fmt.Sprintf("requests %d errors %d skipped %d in %v: %.1f req/s, %.0f out tok/s; TTFT p50 %v p99 %v; latency p50 %v p99 %v",
		r.Requests, r.Errors, r.Skipped, r.Elapsed.Round(time.Millisecond), r.RequestsPerSec, r.OutputTokensPerSec,
		r.TTFT.P50.Round(time.Microsecond), r.TTFT.P99.Round(time.Microsecond),
		r.Latency.P50.Round(time.Microsecond), r.Latency.P99.Round(time.Microsecond))
}

// NewClient returns an HTTP client sized for many concurrent streams to a
// few hosts.
func NewClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
	}}
}

// Run sends the workload to baseURL (e.g. a gateway: baseURL +
// "/v1/chat/completions"). A nil client takes NewClient(). Request failures
// are counted in the Result; the error is for an invalid workload or a
// cancelled ctx (then the Result holds what completed).
func Run(ctx context.Context, baseURL string, w Workload, client *http.Client) (Result, error) {
	return run(ctx, []string{baseURL}, w, client)
}

// RunDirect sends the workload straight to the backends, each request to
// the next backend in turn (round robin per request, as nginx's default
// upstream balancing does, so a conversation's turns land on different
// backends).
func RunDirect(ctx context.Context, backends []string, w Workload, client *http.Client) (Result, error) {
	if len(backends) == 0 {
		return Result{}, fmt.Errorf("%w: no backends", ErrWorkload)
	}
	return run(ctx, backends, w, client)
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model         string         `json:"model,omitempty"`
	Messages      []message      `json:"messages"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options"`
}

// sample is one finished request.
type sample struct {
	ttft, latency   time.Duration
	prompt, outputs int64
}

// collector gathers samples from the workers.
type collector struct {
	mu        sync.Mutex // guards the fields below
	ttft, lat []time.Duration
	res       Result
}

func (c *collector) ok(s sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ttft = append(c.ttft, s.ttft)
	c.lat = append(c.lat, s.latency)
	c.res.Requests++
	c.res.PromptTokens += s.prompt
	c.res.OutputTokens += s.outputs
}

func (c *collector) fail(err error, skipped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Errors++
	c.res.Skipped += skipped
	if len(c.res.FirstErrors) < 5 {
		c.res.FirstErrors = append(c.res.FirstErrors, err.Error())
	}
}

func run(ctx context.Context, targets []string, w Workload, client *http.Client) (Result, error) {
	w, err := w.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if client == nil {
		client = NewClient()
	}
	g := newGen(w)
	urls := make([]string, len(targets))
	for i, t := range targets {
		urls[i] = strings.TrimRight(t, "/") + "/v1/chat/completions"
	}
	sent := make([]atomic.Int64, len(targets))
	var next atomic.Uint64
	pick := func() int { return int((next.Add(1) - 1) % uint64(len(targets))) }

	var col collector
	convs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(w.Concurrency, w.Conversations) {
		wg.Add(1)
		// Owner: run. Stops when convs is closed and drained, or ctx is done.
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			rd := bufio.NewReaderSize(nil, 64<<10)
			for i := range convs {
				converse(ctx, client, g, i, func() string {
					t := pick()
					sent[t].Add(1)
					return urls[t]
				}, &col, &buf, rd)
			}
		}()
	}
feed:
	for i := range w.Conversations {
		select {
		case convs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(convs)
	wg.Wait()

	r := col.res
	r.Elapsed = time.Since(start)
	r.TTFT, r.Latency = summarize(col.ttft), summarize(col.lat)
	if s := r.Elapsed.Seconds(); s > 0 {
		r.OutputTokensPerSec = float64(r.OutputTokens) / s
		r.RequestsPerSec = float64(r.Requests) / s
	}
	r.PerTarget = make(map[string]int, len(targets))
	for i, t := range targets {
		r.PerTarget[t] += int(sent[i].Load())
	}
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("fleetload: run: %w", err)
	}
	return r, nil
}

// converse runs conversation i's turns in order; a failed turn ends it.
func converse(ctx context.Context, client *http.Client, g *gen, i int, url func() string,
	col *collector, buf *bytes.Buffer, rd *bufio.Reader) {
	sys, r := g.conversation(i)
	req := chatRequest{
		Model:         g.w.Model,
		Messages:      make([]message, 1, 1+2*g.w.Turns),
		MaxTokens:     g.w.MaxTokens,
		Stream:        true,
		StreamOptions: map[string]any{"include_usage": true},
	}
	req.Messages[0] = message{Role: "system", Content: g.systems[sys]}
	for turn := range g.w.Turns {
		if ctx.Err() != nil {
			return
		}
		req.Messages = append(req.Messages, message{Role: "user", Content: g.userTurn(r)})
		buf.Reset()
		if err := json.NewEncoder(buf).Encode(&req); err != nil {
			col.fail(fmt.Errorf("fleetload: encode: %w", err), g.w.Turns-turn-1)
			return
		}
		s, answer, err := exchange(ctx, client, url(), buf.Bytes(), g.w.RequestTimeout, rd)
		if err != nil {
			if ctx.Err() != nil {
				return // cancelled run: not a request failure
			}
			col.fail(err, g.w.Turns-turn-1)
			return
		}
		col.ok(s)
		req.Messages = append(req.Messages, message{Role: "assistant", Content: answer})
	}
}

// chunk is the part of a chat.completion.chunk the load reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

var (
	dataPrefix   = []byte("data:")
	doneData     = []byte("[DONE]")
	deltaContent = []byte(`"delta":{"content":"`)
	deltaKey     = []byte(`"delta":`)
	usageKey     = []byte(`"usage":{`)
)

// fastContent extracts the non-empty content of a single-choice token chunk
// shaped like vLLM's without decoding the whole chunk, so the load
// generator stays cheap; ok is false for anything else (role, usage, escaped
// text, several choices), which the caller decodes in full.
func fastContent(data []byte) (string, bool) {
	i := bytes.Index(data, deltaContent)
	if i < 0 {
		return "", false
	}
	rest := data[i+len(deltaContent):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 || bytes.IndexByte(rest[:j], '\\') >= 0 ||
		bytes.Contains(rest[j:], deltaKey) || bytes.Contains(data[:i], deltaKey) || bytes.Contains(data, usageKey) {
		return "", false
	}
	return string(rest[:j]), true
}

// exchange sends one streamed request and reads it to [DONE].
func exchange(ctx context.Context, client *http.Client, url string, body []byte, timeout time.Duration,
	rd *bufio.Reader) (sample, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return sample{}, "", fmt.Errorf("fleetload: request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{}, "", fmt.Errorf("fleetload: post: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return sample{}, "", fmt.Errorf("%w: %d from %s: %s", ErrStatus, resp.StatusCode, url, bytes.TrimSpace(msg))
	}
	rd.Reset(resp.Body)
	defer rd.Reset(nil)
	var (
		s      sample
		answer strings.Builder
		chunks int64
		usage  bool
	)
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			rest, rerr := rd.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), rerr
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrTruncated
			}
			return sample{}, "", fmt.Errorf("fleetload: read stream from %s: %w", url, err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), dataPrefix)
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = bytes.TrimLeft(data, " ")
		if bytes.Equal(data, doneData) {
			// Read to EOF (the chunked terminator) so the connection is
			// reused rather than closed.
			_, _ = io.Copy(io.Discard, io.LimitReader(rd, 64<<10))
			break
		}
		if text, ok := fastContent(data); ok {
			if s.ttft == 0 {
				s.ttft = time.Since(start)
			}
			chunks++
			answer.WriteString(text)
			continue
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return sample{}, "", fmt.Errorf("fleetload: chunk from %s: %w", url, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content == "" {
				continue
			}
			if s.ttft == 0 {
				s.ttft = time.Since(start)
			}
			chunks++
			answer.WriteString(ch.Delta.Content)
		}
		if c.Usage != nil {
			usage = true
			s.prompt, s.outputs = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
	}
	s.latency = time.Since(start)
	if !usage {
		s.outputs = chunks
	}
	if s.ttft == 0 {
		s.ttft = s.latency // no content at all: the first token is the end
	}
	return s, answer.String(), nil
}
