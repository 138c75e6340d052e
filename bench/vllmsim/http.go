package vllmsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
)

// MaxBody bounds a request body.
const MaxBody = 8 << 20

type routes struct {
	s         *Server
	mux       *http.ServeMux
	modelJSON string // the model name as a JSON string
	idPrefix  string // distinguishes servers' response ids
}

func newRoutes(s *Server) *routes {
	m, _ := json.Marshal(s.cfg.Model)
	h := &routes{s: s, mux: http.NewServeMux(), modelJSON: string(m), idPrefix: fmt.Sprintf("chatcmpl-%08x", rand.Uint32())}
	h.mux.HandleFunc("POST /v1/chat/completions", h.chat)
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("GET /health", h.health)
	h.mux.HandleFunc("GET /metrics", h.metrics)
	return h
}

// ServeHTTP serves the OpenAI API subset, /health and /metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.mux.ServeHTTP(w, r) }

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
}

var errBadContent = errors.New("content must be a string, an array of parts or null")

// flatten turns a message content (string, array of parts, null) into text;
// non-text parts count as nothing.
func flatten(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var b strings.Builder
		for i, p := range parts {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
		return b.String(), nil
	}
	return "", errBadContent
}

// writeError answers in the OpenAI error shape vLLM uses.
func writeError(w http.ResponseWriter, code int, typ, msg string) {
	m, _ := json.Marshal(msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"error":{"message":%s,"type":%q,"param":null,"code":%d}}`, m, typ, code)
}

func (h *routes) chat(w http.ResponseWriter, r *http.Request) {
	s := h.s
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		s.reject()
		writeError(w, http.StatusBadRequest, "BadRequestError", "cannot read body: "+err.Error())
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.reject()
		writeError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON: "+err.Error())
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		s.reject()
		writeError(w, http.StatusNotFound, "NotFoundError", "The model `"+req.Model+"` does not exist.")
		return
	}
	if len(req.Messages) == 0 {
		s.reject()
		writeError(w, http.StatusBadRequest, "BadRequestError", "messages must not be empty")
		return
	}
	msgs := make([]message, len(req.Messages))
	for i, m := range req.Messages {
		text, err := flatten(m.Content)
		if err != nil {
			s.reject()
			writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("messages[%d].content: %v", i, err))
			return
		}
		msgs[i] = message{role: m.Role, content: text}
	}
	prompt := tokenize(msgs)
	maxTokens := min(s.cfg.DefaultMaxTokens, s.cfg.MaxModelLen-len(prompt))
	// As vLLM's `max_completion_tokens or max_tokens`: the newer field wins
	// when both are sent, and a 0 (falsy in Python) defers to the other.
	switch {
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens != 0:
		maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 1 || len(prompt)+maxTokens > s.cfg.MaxModelLen {
		s.reject()
		writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, len(prompt)+maxTokens, len(prompt), maxTokens))
		return
	}
	q, err := s.submit(prompt, maxTokens)
	switch {
	case errors.Is(err, errQueueFull):
		writeError(w, http.StatusTooManyRequests, "TooManyRequestsError", "waiting queue is full")
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", err.Error())
		return
	}
	id := h.idPrefix + strconv.FormatUint(q.id, 16)
	if req.Stream {
		h.stream(w, r, q, id, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	h.complete(w, r, q, id)
}

// wait blocks until q progresses; false when the client went away (q is
// aborted) or the server closed.
func (h *routes) wait(r *http.Request, q *seq) bool {
	select {
	case <-q.notify:
		return true
	case <-r.Context().Done():
		h.s.abort(q)
		return false
	case <-h.s.stop:
		return false
	}
}

// chunkHead starts a chat.completion.chunk event.
func (h *routes) chunkHead(b []byte, id string) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, h.s.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, h.modelJSON...)
	return b
}

// stream writes vLLM's SSE framing: a role chunk at once, one chunk per
// token (the last carrying finish_reason), the usage chunk when asked for,
// then [DONE].
func (h *routes) stream(w http.ResponseWriter, r *http.Request, q *seq, id string, usage bool) {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	b := h.chunkHead(make([]byte, 0, 512), id)
	b = append(b, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	sent := 0
	for {
		fin := q.finished.Load() // before emitted: once set, emitted is final
		n := int(q.emitted.Load())
		for ; sent < n; sent++ {
			b = h.chunkHead(b, id)
			b = append(b, `,"choices":[{"index":0,"delta":{"content":`...)
			b = strconv.AppendQuote(b, answerText(q.seed, sent))
			// The last token is known by count, not by fin: the engine
			// stores emitted before finished, so this loop can see every
			// token while finished still reads false.
			if sent == q.maxTokens-1 {
				b = append(b, `},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`+"\n\n"...)
			} else {
				b = append(b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
			}
		}
		if fin {
			break
		}
		if _, err := w.Write(b); err != nil {
			h.s.abort(q)
			return
		}
		b = b[:0]
		if err := rc.Flush(); err != nil {
			h.s.abort(q)
			return
		}
		if !h.wait(r, q) {
			return
		}
	}
	if usage {
		b = h.chunkHead(b, id)
		b = append(b, `,"choices":[],"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(q.promptLen), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(q.promptLen+sent), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(sent), 10)
		b = append(b, "}}\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	_, _ = w.Write(b)
	_ = rc.Flush()
}

// complete waits for the whole answer and writes a chat.completion.
func (h *routes) complete(w http.ResponseWriter, r *http.Request, q *seq, id string) {
	for !q.finished.Load() {
		if !h.wait(r, q) {
			if r.Context().Err() == nil {
				writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", ErrClosed.Error())
			}
			return
		}
	}
	n := int(q.emitted.Load())
	var text strings.Builder
	for i := range n {
		text.WriteString(answerText(q.seed, i))
	}
	b := make([]byte, 0, 512+text.Len())
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, h.s.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, h.modelJSON...)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":`...)
	b = strconv.AppendQuote(b, text.String())
	b = append(b, `,"tool_calls":[]},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(q.promptLen), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(q.promptLen+n), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"prompt_tokens_details":null},"prompt_logprobs":null,"kv_transfer_params":null}`...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (h *routes) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"object":"list","data":[{"id":%s,"object":"model","created":%d,"owned_by":"vllm","root":%s,"parent":null,"max_model_len":%d,"permission":[]}]}`,
		h.modelJSON, h.s.created, h.modelJSON, h.s.cfg.MaxModelLen)
}

func (h *routes) health(w http.ResponseWriter, _ *http.Request) {
	h.s.mu.Lock()
	closed := h.s.closed
	h.s.mu.Unlock()
	if closed {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}
