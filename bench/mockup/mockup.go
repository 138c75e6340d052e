// Package mockup is a vLLM-shaped OpenAI-compatible upstream for
// benchmarks: POST /v1/chat/completions answers a fixed chat.completion at
// once, or, with "stream": true, a paced SSE stream of chat.completion.chunk
// events followed by [DONE]; GET /health, /metrics (vLLM gauges) and
// /v1/models answer what the vllm adapter probes.
//
// Stream pacing defaults to DefaultChunks chunks DefaultInterval apart (the
// first at once); the request body's members BodyChunks and BodyInterval,
// or else the request headers HeaderChunks and HeaderInterval, override it,
// so one upstream serves short and long-lived streams. The body members
// are what a gateway carries through: iop-edge forwards only an allowlist
// of request headers, but the body as the client sent it.
//
// Streams over HTTP/1.1 leave net/http after the request: the connection is
// hijacked and one pacer goroutine per process writes every stream's due
// chunks (stream.go), so that thousands of concurrent streams cost the mock
// little more than the socket writes. The connection stays keep-alive.
package mockup

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Stream pacing defaults and request headers overriding them.
const (
	DefaultChunks   = 64
	DefaultInterval = 20 * time.Millisecond
	HeaderChunks    = "X-Bench-Chunks"
	HeaderInterval  = "X-Bench-Interval-Ms"
	BodyChunks      = "bench_chunks"
	BodyInterval    = "bench_interval_ms"
	// MaxChunks bounds a stream so no request can hold the mock forever.
	MaxChunks = 100000
	// Model is the model id the mock answers with.
	Model = "bench-model"
)

const created = "1735689600"

// Completion is the non-streamed answer: a vLLM chat.completion with a
// 64-token assistant message.
var Completion = []byte(`{"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion","created":` + created +
	`,"model":"` + Model + `","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":` +
	`"Sure. Here is a short answer that is about sixty four tokens long, which is typical for a chat reply: the gateway ` +
	`relays the request to the provider, the provider generates the tokens, and the gateway returns them unchanged to the ` +
	`client that asked, with usage accounted on the side.","tool_calls":[]},"logprobs":null,"finish_reason":"stop",` +
	`"stop_reason":null}],"usage":{"prompt_tokens":48,"total_tokens":112,"completion_tokens":64,"prompt_tokens_details":null},` +
	`"prompt_logprobs":null,"kv_transfer_params":null}`)

// chunk renders one chat.completion.chunk event. With usage (the request
// asked for stream_options.include_usage) it carries "usage":null, as
// vLLM's and OpenAI's chunks do until the usage chunk.
func chunk(delta, finish string, usage bool) []byte {
	tail := `}]}`
	if usage {
		tail = `}],"usage":null}`
	}
	return []byte(`data: {"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion.chunk","created":` + created +
		`,"model":"` + Model + `","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish +
		tail + "\n\n")
}

// The stream's events, indexed by whether usage was asked for.
var (
	firstChunk = [2][]byte{chunk(`{"role":"assistant","content":"Sure"}`, "null", false), chunk(`{"role":"assistant","content":"Sure"}`, "null", true)}
	midChunk   = [2][]byte{chunk(`{"content":" token"}`, "null", false), chunk(`{"content":" token"}`, "null", true)}
	lastChunk  = [2][]byte{chunk(`{"content":"."}`, `"stop"`, false), chunk(`{"content":"."}`, `"stop"`, true)}
	doneEvent  = []byte("data: [DONE]\n\n")
)

// b2i indexes the chunk tables above.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func usageChunk(completion int) []byte {
	return []byte(`data: {"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion.chunk","created":` + created +
		`,"model":"` + Model + `","choices":[],"usage":{"prompt_tokens":48,"total_tokens":` + strconv.Itoa(48+completion) +
		`,"completion_tokens":` + strconv.Itoa(completion) + `}}` + "\n\n")
}

const metricsText = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="bench-model"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="bench-model"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="bench-model"} 0.01
`

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Handler serves the mock API. Paced streams on HTTP/1.1 connections are
// hijacked and written by one pacer goroutine, so that the mock costs the
// harness little.
func Handler() http.Handler { return handler(true) }

// NetHTTPHandler serves the same API with every stream written through
// net/http by its own handler goroutine (a timer and a flush per chunk):
// what a plain Go HTTP server holds per open stream.
func NetHTTPHandler() http.Handler { return handler(false) }

func handler(hijack bool) http.Handler {
	mux := http.NewServeMux()
	// chat hands hijacked connections to serveConn, which answers their
	// later requests with this same mux.
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if !hijack {
			w = noHijack{w}
		}
		chat(w, r, mux)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, metricsText)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+Model+`","object":"model","created":`+created+`,"owned_by":"vllm","max_model_len":32768}]}`)
	})
	return mux
}

// Server returns an http.Server for Handler with loopback-friendly limits.
func Server() *http.Server {
	return &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
}

// noHijack hides the Hijacker of a ResponseWriter; the response controller
// still reaches the Flusher through Unwrap.
type noHijack struct{ http.ResponseWriter }

func (w noHijack) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamStarter is the ResponseWriter of a hijacked connection: it starts
// the stream on the pacer itself.
type streamStarter interface {
	startStream(chunks int, interval time.Duration, usage bool)
}

func chat(w http.ResponseWriter, r *http.Request, h http.Handler) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(io.LimitReader(r.Body, 8<<20))
	body := buf.Bytes()
	stream := bytes.Contains(body, []byte(`"stream":true`)) || bytes.Contains(body, []byte(`"stream": true`))
	usage := bytes.Contains(body, []byte(`"include_usage":true`)) || bytes.Contains(body, []byte(`"include_usage": true`))
	var chunks int
	var interval time.Duration
	var perr error
	if stream {
		chunks, interval, perr = pacing(body, r.Header)
	}
	bodyPool.Put(buf)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if !stream {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(Completion)))
		_, _ = w.Write(Completion)
		return
	}
	if perr != nil {
		http.Error(w, perr.Error(), http.StatusBadRequest)
		return
	}
	if st, ok := w.(streamStarter); ok {
		st.startStream(chunks, interval, usage)
		return
	}
	// HTTP/1.1 streams go to the pacer; anything else (HTTP/1.0, HTTP/2,
	// a wrapped ResponseWriter) is served by this goroutine.
	if hj, ok := w.(http.Hijacker); ok && r.ProtoMajor == 1 && r.ProtoMinor == 1 && hijackStream(hj, r, h, chunks, interval, usage) {
		return
	}
	serveStream(w, r, chunks, interval, usage)
}

// pacing reads a stream's pacing from the body's members, else from the
// headers, else the defaults.
func pacing(body []byte, h http.Header) (int, time.Duration, error) {
	chunks, interval := DefaultChunks, DefaultInterval
	v, ok := bodyInt(body, BodyChunks)
	if !ok {
		v = h.Get(HeaderChunks)
	}
	if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxChunks {
			return 0, 0, fmt.Errorf("stream chunks: want 1..%d", MaxChunks)
		}
		chunks = n
	}
	v, ok = bodyInt(body, BodyInterval)
	if !ok {
		v = h.Get(HeaderInterval)
	}
	if v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 || ms > 60000 {
			return 0, 0, fmt.Errorf("stream interval: want 0..60000 ms")
		}
		interval = time.Duration(ms) * time.Millisecond
	}
	return chunks, interval, nil
}

// bodyInt finds the member "name": <digits> in a JSON body by its bytes
// (the mock's bodies are the benchmark's own; a full decode per request
// would be the mock's largest cost). ok is false when the member is absent;
// v is then empty.
func bodyInt(body []byte, name string) (v string, ok bool) {
	key := `"` + name + `"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := bytes.TrimLeft(body[i+len(key):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return "", false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	n := 0
	for n < len(rest) && (rest[n] >= '0' && rest[n] <= '9' || n == 0 && rest[n] == '-') {
		n++
	}
	// A member that is not a plain integer is reported as such (Atoi fails).
	if n == 0 {
		return "?", true
	}
	return string(rest[:n]), true
}

// serveStream writes the stream through net/http (a goroutine, a timer and
// a flush per chunk), where the connection cannot be hijacked. It writes
// chunks events, the i-th at start + i*interval (an
// absolute schedule, so scheduling delays do not accumulate), then the
// usage chunk when asked for and [DONE].
func serveStream(w http.ResponseWriter, r *http.Request, chunks int, interval time.Duration, usage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	ctx := r.Context()
	start := time.Now()
	var timer *time.Timer
	for i := 0; i < chunks; i++ {
		if i > 0 && interval > 0 {
			wait := time.Until(start.Add(time.Duration(i) * interval))
			if wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
					defer timer.Stop()
				} else {
					timer.Reset(wait)
				}
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
		}
		c := midChunk[b2i(usage)]
		switch {
		case i == chunks-1:
			c = lastChunk[b2i(usage)]
		case i == 0:
			c = firstChunk[b2i(usage)]
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		if i == chunks-1 {
			break // the tail goes out with the last chunk's flush
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	if usage {
		_, _ = w.Write(usageChunk(chunks))
	}
	_, _ = w.Write(doneEvent)
	_ = rc.Flush()
}
