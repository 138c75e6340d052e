// Package mockup is a vLLM-shaped OpenAI-compatible upstream for
// benchmarks: POST /v1/chat/completions answers a fixed chat.completion at
// once, or, with "stream": true, a paced SSE stream of chat.completion.chunk
// events followed by [DONE]; GET /health, /metrics (vLLM gauges) and
// /v1/models answer what the vllm adapter probes.
//
// Stream pacing defaults to DefaultChunks chunks DefaultInterval apart (the
// first at once); the request headers HeaderChunks and HeaderInterval
// override it, so one upstream serves short and long-lived streams.
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

func chunk(delta, finish string) []byte {
	return []byte(`data: {"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion.chunk","created":` + created +
		`,"model":"` + Model + `","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish +
		`}]}` + "\n\n")
}

var (
	firstChunk = chunk(`{"role":"assistant","content":"Sure"}`, "null")
	midChunk   = chunk(`{"content":" token"}`, "null")
	lastChunk  = chunk(`{"content":"."}`, `"stop"`)
	doneEvent  = []byte("data: [DONE]\n\n")
)

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

// Handler serves the mock API.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", chat)
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

func chat(w http.ResponseWriter, r *http.Request) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(io.LimitReader(r.Body, 8<<20))
	body := buf.Bytes()
	stream := bytes.Contains(body, []byte(`"stream":true`)) || bytes.Contains(body, []byte(`"stream": true`))
	usage := bytes.Contains(body, []byte(`"include_usage":true`)) || bytes.Contains(body, []byte(`"include_usage": true`))
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
	chunks, interval, err := pacing(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	serveStream(w, r, chunks, interval, usage)
}

func pacing(h http.Header) (int, time.Duration, error) {
	chunks, interval := DefaultChunks, DefaultInterval
	if v := h.Get(HeaderChunks); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxChunks {
			return 0, 0, fmt.Errorf("%s: want 1..%d", HeaderChunks, MaxChunks)
		}
		chunks = n
	}
	if v := h.Get(HeaderInterval); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 || ms > 60000 {
			return 0, 0, fmt.Errorf("%s: want 0..60000", HeaderInterval)
		}
		interval = time.Duration(ms) * time.Millisecond
	}
	return chunks, interval, nil
}

// serveStream writes chunks events, the i-th at start + i*interval (an
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
		c := midChunk
		switch {
		case i == chunks-1:
			c = lastChunk
		case i == 0:
			c = firstChunk
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
