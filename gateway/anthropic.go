package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/anthropicapi"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The Anthropic Messages surface (POST /v1/messages) is a translating front
// over the OpenAI chat pipeline: the request becomes an OpenAI chat body
// (anthropicapi.Request.OpenAIChat), which goes through the same parsing,
// queue, lease, routing and both paths (the tunnel sends that body
// upstream; a run normalizes it like any chat); what the pipeline writes
// (a chat.completion, chat.completion.chunk events or an OpenAI error) is
// rendered back as Messages JSON, Messages events or an Anthropic error by
// messagesWriter. Cancellation, timeouts and the honest end of a broken
// stream (an error event, never a fake message_stop) are the pipeline's own.

// Surface names for the access log and iop_surface_requests_total.
const (
	surfaceOpenAI    = "openai"
	surfaceAnthropic = "anthropic"
)

// anthropicBetaHeader is anthropic-beta in its canonical form, which
// http.Header looks up without allocating a canonical copy per request.
const anthropicBetaHeader = "Anthropic-Beta"

// maxHeldMessage bounds a non-streamed answer held for conversion: the
// tunnel relay holds non-stream answers within the same bound.
const maxHeldMessage = 32 << 20

// anthropicFront installs the converting writer around the rest of the
// chain, so every answer (auth and body-limit refusals included) leaves in
// Anthropic's shape, then restores the writer for the access log.
func (s *Server) anthropicFront(c *gin.Context) {
	info(c).surface = surfaceAnthropic
	mw := &messagesWriter{ResponseWriter: c.Writer, header: http.Header{}, requestID: info(c).requestID,
		writeTimeout: time.Duration(s.limits.Load().WriteTimeoutSec) * time.Second}
	c.Writer = mw
	defer func() {
		mw.finish()
		c.Writer = mw.ResponseWriter
	}()
	c.Next()
}

// errorHeaders are the headers of an OpenAI-shaped error the converted
// Anthropic error keeps: when to retry (429, 503), and the coding a 415
// asks for.
var errorHeaders = [...]string{"Retry-After", "Accept-Encoding"}

// maxRetryAfterSec bounds the delay a Retry-After passed on to a Messages
// client may ask for, as openaiapi bounds a node's retry hint: a hostile or
// broken upstream must not tell clients to stay away for days.
const maxRetryAfterSec = 3600

// retryAfter is v, a Retry-After of the answer the pipeline wrote (an
// upstream's, tunnelled as it came, or the edge's own), as the Messages
// surface passes it on: delta-seconds (RFC 9110 §10.2.3) with more than
// maxRetryAfterSec clamped to it, or an HTTP-date as it came, unless it is
// more than maxRetryAfterSec after now, when it is maxRetryAfterSec as
// delta-seconds (a date is the same delay put another way); anything else
// (empty, a negative or fractional number, words, a date in no form HTTP
// knows) is "", no header.
func retryAfter(v string, now time.Time) string {
	if v == "" {
		return ""
	}
	digits := true
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			digits = false
			break
		}
	}
	if digits {
		// More digits than an int holds is more than the bound too.
		n, err := strconv.Atoi(v)
		if err != nil || n > maxRetryAfterSec {
			n = maxRetryAfterSec
		}
		return strconv.Itoa(n) // leading zeros gone
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return ""
	}
	if t.Sub(now) > maxRetryAfterSec*time.Second {
		return strconv.Itoa(maxRetryAfterSec)
	}
	return v
}

// messages serves POST /v1/messages.
func (s *Server) messages(c *gin.Context) {
	if k := s.messagesCall(c); k != nil {
		s.dispatch(c, k)
	}
}

//go:noinline
func (s *Server) messagesCall(c *gin.Context) *call {
	body, ok := s.readBody(c)
	if !ok {
		return nil
	}
	areq, aerr := anthropicapi.ParseRequest(body)
	if aerr == nil {
		aerr = areq.CheckBetas(c.Request.Header.Values(anthropicBetaHeader))
	}
	if aerr != nil {
		writeAnthropicError(c, aerr)
		return nil
	}
	chat, err := areq.OpenAIChat()
	if err != nil {
		writeAnthropicError(c, anthropicapi.NewError(http.StatusBadRequest, "The request could not be converted."))
		return nil
	}
	req, err := openaiapi.ParseChat(chat)
	if err != nil {
		writeError(c, apiError(err, "")) // converted to Anthropic's shape by the writer
		return nil
	}
	if mw, ok := c.Writer.(*messagesWriter); ok {
		mw.start(areq, req.EstimatePromptTokens())
	}
	// The run path reads req (earlier thinking included); a tunnel sends
	// the body its provider reads earlier thinking by, rendered when a
	// tunnel is chosen (tunnelBody).
	k := &call{op: opChat, path: "/chat/completions", model: req.Model, body: chat, stream: req.Stream,
		hasTools: req.HasTools, tokens: req.EstimatePromptTokens(), render: req.RenderOptions(), messages: areq,
		bodyReasoning: areq.ChatMember(), thinkingOff: areq.ThinkingOff || areq.Prefill,
		formatWithTools: areq.HasFormat() && req.HasTools && req.ToolChoice != "none"}
	// A prefill is answered without thinking (ParseRequest refused one
	// with thinking enabled): its continuation follows the prefill's text
	// at once, and llama.cpp's server refuses a prefill with its
	// template's thinking on ("Assistant response prefill is incompatible
	// with enable_thinking"), so it goes as thinking off does.
	k.parsed = &messagesChat{ChatRequest: req, k: k, prefill: areq.Prefill}
	return k
}

// messagesChat is the parsed chat of a Messages call, with what its chat
// body cannot carry to every backend added to a run's input: thinking
// turned off becomes reasoning_effort "none" in the run's extra members,
// which the ollama adapter maps to think: false as Ollama's own OpenAI
// layer does, on a provider that is not OpenAI-compatible (whose adapters
// ignore extra members they do not read). On vLLM and llama.cpp it becomes
// chat_template_kwargs (templateThinking), on a run as on a tunnel
// (tunnelBody). Any other OpenAI-compatible provider gets nothing new,
// even on a run (its adapter passes extra members upstream as they are),
// as the tunnel does not: strict servers (OpenAI itself) refuse a member
// or an effort they do not know, and models that do not reason refuse
// reasoning_effort.
//
// A prefill (anthropicapi.Request.Prefill) on a vLLM provider gets vLLM's
// continuation members too, as its tunnel body does (TunnelChat).
type messagesChat struct {
	*openaiapi.ChatRequest
	k       *call // thinkingOff, and the current attempt's provider (tunnelProvider, providerType)
	prefill bool  // the conversation ends with an assistant message to continue
}

// reasoningOff is the reasoning effort that turns thinking off;
// templateOff is the chat_template_kwargs that does (templateThinking);
// jsonFalse and jsonTrue are vLLM's continuation members' values.
var (
	reasoningOff = json.RawMessage(`"none"`)
	templateOff  = json.RawMessage(`{"enable_thinking":false}`)
	jsonFalse    = json.RawMessage(`false`)
	jsonTrue     = json.RawMessage(`true`)
)

// runMember is a member a run's extra members get.
type runMember struct {
	name  string
	value json.RawMessage
}

// templateThinking reports whether a provider of adapter type typ (a
// config.ProviderSpec type) takes chat_template_kwargs, by which a chat
// template that reads enable_thinking stops the model thinking: vLLM's and
// llama.cpp's servers do. openai_compat may be any server, OpenAI's own
// included, which refuses members it does not know.
func templateThinking(typ string) bool {
	return typ == config.ProviderTypeVLLM || typ == config.ProviderTypeLlamaCpp
}

// RunInput is the chat's run input, reasoning_effort "none" or
// chat_template_kwargs added when thinking is off and the provider can
// take it (see messagesChat).
func (m *messagesChat) RunInput() (*iop.RunInput, error) {
	in, err := m.ChatRequest.RunInput()
	if err != nil {
		return nil, err
	}
	if m.k.formatWithTools && formatBlocksTools(m.k.providerType) {
		in.ResponseFormat = nil // as on a tunnel (tunnelBody)
	}
	add := m.runMembers()
	if len(add) == 0 {
		return in, nil
	}
	members := map[string]json.RawMessage{}
	if len(in.Extra) > 0 {
		// The edge's own encoding of an object (extraMembers).
		if err := json.Unmarshal(in.Extra, &members); err != nil {
			return nil, fmt.Errorf("gateway: run extra members: %w", err)
		}
	}
	for _, a := range add {
		members[a.name] = a.value
	}
	if in.Extra, err = json.Marshal(members); err != nil {
		return nil, fmt.Errorf("gateway: run extra members: %w", err)
	}
	return in, nil
}

// runMembers are the members the current attempt's run adds to the chat's
// extra members, replacing any of the same name: thinking off as its
// provider takes it, and vLLM's continuation of a prefill. Nil: none.
func (m *messagesChat) runMembers() []runMember {
	var add []runMember
	if m.k.thinkingOff {
		switch {
		case templateThinking(m.k.providerType):
			add = append(add, runMember{"chat_template_kwargs", templateOff})
		case !m.k.tunnelProvider:
			add = append(add, runMember{"reasoning_effort", reasoningOff})
		}
	}
	if m.prefill && m.k.providerType == config.ProviderTypeVLLM {
		add = append(add, runMember{"add_generation_prompt", jsonFalse}, runMember{"continue_final_message", jsonTrue})
	}
	return add
}

// countTokens serves POST /v1/messages/count_tokens: an estimate (the
// edge's tokenizer-free estimator), documented as one.
func (s *Server) countTokens(c *gin.Context) {
	body, ok := s.readBody(c)
	if !ok {
		return
	}
	areq, aerr := anthropicapi.ParseCountRequest(body)
	if aerr == nil {
		aerr = areq.CheckBetas(c.Request.Header.Values(anthropicBetaHeader))
	}
	if aerr != nil {
		writeAnthropicError(c, aerr)
		return
	}
	if !s.knownModel(areq.Model) {
		writeError(c, apiError(dispatch.ErrModelNotFound, areq.Model))
		return
	}
	w := c.Writer
	if mw, ok := w.(*messagesWriter); ok {
		mw.direct, w = true, mw.ResponseWriter // already Anthropic's shape
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", info(c).requestID)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(anthropicapi.CountTokensResponse(anthropicapi.CountTokens(areq)))
}

// writeAnthropicError answers with an Anthropic error envelope directly.
func writeAnthropicError(c *gin.Context, e *anthropicapi.Error) {
	if mw, ok := c.Writer.(*messagesWriter); ok {
		mw.direct = true
		anthropicapi.WriteError(mw.ResponseWriter, mw.requestID, e)
	} else {
		anthropicapi.WriteError(c.Writer, info(c).requestID, e)
	}
	c.Abort()
}

// messagesWriter converts what the OpenAI pipeline writes into the
// Messages surface. Until start it only converts errors; after start it
// converts a chat.completion (held, then rendered) or the chunk stream
// (event by event, as it arrives).
type messagesWriter struct {
	gin.ResponseWriter             // the real writer
	header             http.Header // what the pipeline sets; only errorHeaders go out
	requestID          string
	status             int  // as the pipeline wrote it; 0 until then
	direct             bool // the answer went to the real writer already
	req                *anthropicapi.Request
	promptTokens       int
	held               bytes.Buffer // a non-stream answer or an error body
	overflow           bool
	sw                 *anthropicapi.StreamWriter // nil until a 200 stream starts
	pending            []byte                     // a partial SSE event, line ends as LF
	scanned            int                        // bytes of pending searched for the event end
	cr                 bool                       // the last byte written was a CR (see appendLF)
	pinged             bool                       // the stream's ping went out
	werr               error                      // the first write error on the real writer
	// writeTimeout bounds finish's writes (a held answer is up to
	// maxHeldMessage): the relay's deadline covers only what it writes.
	writeTimeout time.Duration
	// fdw, set by finish, re-arms the write deadline for each of finish's
	// writes, so that a client reading a large answer slowly but steadily
	// is not cut off by one deadline for the whole of it.
	fdw *deadlineWriter
}

// Unwrap is the real writer, for http.ResponseController: without it the
// relay's write deadline (deadlineWriter) cannot be set on an Anthropic
// stream, and a client that stops reading would hold its lease.
func (w *messagesWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *messagesWriter) start(req *anthropicapi.Request, promptTokens int) {
	w.req, w.promptTokens = req, promptTokens
}

func (w *messagesWriter) Header() http.Header { return w.header }

func (w *messagesWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *messagesWriter) WriteHeaderNow() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
}

func (w *messagesWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *messagesWriter) Written() bool { return w.status != 0 || w.direct }

func (w *messagesWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// streaming reports whether writes are stream events to convert now.
func (w *messagesWriter) streaming() bool {
	return w.req != nil && w.req.Stream && w.Status() == http.StatusOK
}

// wholeAnswer reports that the upstream answered a stream request with one
// JSON document (it ignored "stream": true): that is held like a
// non-stream answer and written as a stream at the end (finish).
func (w *messagesWriter) wholeAnswer() bool {
	mt, _, _ := mime.ParseMediaType(w.header.Get("Content-Type"))
	return mt == "application/json"
}

// newStreamWriter is the request's Messages stream writer: thinking shown,
// hidden or without its text (display "omitted") as the request asked.
func (w *messagesWriter) newStreamWriter() *anthropicapi.StreamWriter {
	sw := anthropicapi.NewStreamWriter(committer{w}, nil, w.req.Model, w.promptTokens, w.req.StopSequences, w.req.Thinking)
	if w.req.ThinkingOmitted {
		sw.OmitThinking()
	}
	return sw
}

func (w *messagesWriter) Write(p []byte) (int, error) {
	w.WriteHeaderNow()
	if w.direct {
		// Answered already (a stream's first event was an error, see
		// event): the rest of the upstream's stream is dropped.
		return len(p), nil
	}
	if !w.streaming() || w.wholeAnswer() {
		if w.held.Len()+len(p) > maxHeldMessage {
			w.overflow = true
			return 0, errHeldTooLarge
		}
		return w.held.Write(p)
	}
	if w.sw == nil {
		// No flush per event: the relay flushes (Flush, below) once it
		// has no further chunk at hand.
		w.sw = w.newStreamWriter()
	}
	w.pending = appendLF(w.pending, p, &w.cr)
	for {
		// Only the new bytes are searched, from the last old one (it may
		// be the first LF of the end): an event that arrives in many
		// writes costs its length, not its square.
		i := bytes.Index(w.pending[w.scanned:], []byte("\n\n"))
		if i < 0 {
			w.scanned = max(len(w.pending)-1, 0)
			break
		}
		i += w.scanned
		ev := w.pending[:i]
		if err := w.event(ev); err != nil {
			return 0, err
		}
		if w.direct {
			w.pending, w.scanned = nil, 0
			return len(p), nil
		}
		if !w.pinged && w.sw.Started() && !w.sw.Done() {
			// One ping early in the stream, as Anthropic's API sends.
			w.pinged = true
			if err := w.sw.Ping(); err != nil {
				return 0, err
			}
		}
		w.pending, w.scanned = w.pending[i+2:], 0
	}
	if len(w.pending) > maxHeldMessage {
		return 0, errHeldTooLarge
	}
	if w.werr != nil {
		return 0, w.werr
	}
	return len(p), nil
}

// appendLF appends p to dst with its line ends made LF: the SSE grammar
// lets an upstream end lines with CRLF, LF or a lone CR. *cr carries a CR
// that ended the previous p across calls, so that a CRLF split between
// two writes is one line end.
func appendLF(dst, p []byte, cr *bool) []byte {
	for len(p) > 0 {
		if *cr {
			*cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexByte(p, '\r')
		if i < 0 {
			return append(dst, p...)
		}
		dst = append(append(dst, p[:i]...), '\n')
		*cr = true
		p = p[i+1:]
	}
	return dst
}

// event converts one SSE event of the OpenAI stream: its data lines are
// a chunk, [DONE] or an error payload.
func (w *messagesWriter) event(ev []byte) error {
	var data []byte
	for _, line := range bytes.Split(ev, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	if len(data) == 0 || w.sw.Done() {
		return nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		return w.sw.Finish()
	}
	if !w.sw.Started() {
		// A stream whose first event is the upstream's error document (no
		// choice beside it: vLLM's and llama.cpp's error chunk): nothing
		// has reached the client, so it is answered as a whole answer's
		// error document is, an error status with the upstream's
		// Retry-After, which an SDK retries by, rather than a stream of
		// one error event under a 200 it would not retry.
		if e, ok := anthropicapi.UpstreamError(data); ok {
			w.direct = true
			w.writeUpstreamError(e)
			return nil
		}
	}
	return w.sw.Chunk(data)
}

// Flush sends what the converted events wrote so far. The relay calls it
// after a chunk unless the next one has already arrived (flushBatch), so a
// backlog leaves in one write, as on the OpenAI surface. Before a stream
// starts, nothing has been written to the real writer: a no-op.
//
// A stream whose chunks so far converted to no event (vLLM's and OpenAI's
// first chunk carries only the role; a reasoning model's thinking is dropped
// when the request did not enable thinking) starts here with message_start
// and the ping, as Anthropic's API sends them at once: the client has its
// headers and knows the answer is on its way. Flushing the real writer
// before that would commit the response without the stream's headers
// (text/plain, no request-id).
func (w *messagesWriter) Flush() {
	if w.sw == nil || w.direct {
		return
	}
	if !w.sw.Started() {
		if len(bytes.Trim(w.pending, "\n")) > 0 {
			// The first event has begun but not ended (it came in more
			// than one write): it may be the upstream's error, answered
			// with its own status only while nothing has been written
			// (event). Whether it is must not depend on where the
			// transport split it: the stream starts once it ends.
			return
		}
		w.pinged = true
		if w.sw.Ping() != nil {
			return
		}
	}
	w.ResponseWriter.Flush()
}

// committer writes to the real writer, committing the SSE headers first.
type committer struct{ w *messagesWriter }

func (c committer) Write(p []byte) (int, error) {
	rw := c.w.ResponseWriter
	if !rw.Written() {
		h := rw.Header()
		// The pipeline's own stream headers went to w.header, which
		// stays behind: these are the OpenAI surface's run-stream
		// headers (X-Accel-Buffering keeps a proxy in front, nginx, from
		// buffering the stream), their values shared as there.
		setSSEHeaders(h)
		h.Set("request-id", c.w.requestID)
		rw.WriteHeader(http.StatusOK)
	}
	var (
		n   int
		err error
	)
	if c.w.fdw != nil {
		n, err = c.w.fdw.Write(p)
	} else {
		n, err = rw.Write(p)
	}
	if err != nil && c.w.werr == nil {
		c.w.werr = err
	}
	return n, err
}

var errHeldTooLarge = errors.New("gateway: answer too large to convert")

// upstreamError answers a held whole answer that is an upstream's error
// document though its status said success (anthropicapi.UpstreamError)
// with that error in Anthropic's envelope and status, and reports whether
// it did. The OpenAI surface relays such a body as it came; a Messages
// client would get a completion it cannot convert.
func (w *messagesWriter) upstreamError() bool {
	e, ok := anthropicapi.UpstreamError(w.held.Bytes())
	if ok {
		w.writeUpstreamError(e)
	}
	return ok
}

// writeUpstreamError answers e, an upstream's error document that came
// with a success status, as an error status would have been answered:
// with the upstream's Retry-After (validated by retryAfter), which an
// upstream that is rate limiting or overloaded sends beside it whatever
// its status. Only Retry-After: the other errorHeader, Accept-Encoding,
// means something only beside a 415.
//
// The answer goes out whole at once, its length declared: a stream's
// first event answered so (event) is answered while the relay still
// reads the rest of the upstream's stream, dropped, until its end; held
// in the response buffer, or sent without a length, it would reach the
// client only with that end (an upstream that goes on or hangs after
// its error: up to the stream idle timeout, or never).
func (w *messagesWriter) writeUpstreamError(e *anthropicapi.Error) {
	w.passHeaders("Retry-After")
	rw := w.ResponseWriter
	held := heldAnswer{header: rw.Header()}
	anthropicapi.WriteError(&held, w.requestID, e)
	rw.Header().Set("Content-Length", strconv.Itoa(len(held.body)))
	rw.WriteHeader(held.status)
	_, _ = rw.Write(held.body) // the client went away; nothing left to tell it
	rw.Flush()
}

// heldAnswer is an answer written to it held whole (its headers set on
// the real writer's), for writeUpstreamError to send with its length.
type heldAnswer struct {
	header http.Header
	status int
	body   []byte
}

func (h *heldAnswer) Header() http.Header { return h.header }

func (h *heldAnswer) WriteHeader(code int) { h.status = code }

func (h *heldAnswer) Write(p []byte) (int, error) {
	h.body = append(h.body, p...)
	return len(p), nil
}

// passHeaders sets the pipeline's headers named (canonical names) on the
// real writer, a Retry-After as retryAfter passes it on; an absent or
// refused one is not set.
func (w *messagesWriter) passHeaders(names ...string) {
	h := w.ResponseWriter.Header()
	for _, k := range names {
		v := w.header.Get(k)
		if k == "Retry-After" {
			v = retryAfter(v, time.Now())
		}
		if v != "" {
			h.Set(k, v)
		}
	}
}

// finish renders what was held: an error in Anthropic's shape, or the
// chat.completion as a Messages answer; and ends a stream that stopped
// without [DONE] or an error event with an error event.
func (w *messagesWriter) finish() {
	if w.direct {
		return
	}
	rw := w.ResponseWriter
	// The lease is back by now, but a client that stops reading would
	// still pin this goroutine, its connection and the held answer. The
	// relay's last write left a deadline on the connection today; this
	// one does not rely on that, and moves it as the writes go on (a
	// whole answer goes out in pieces, see writeWhole). An error (the
	// connection is gone) shows in the writes below.
	if dw := newDeadlineWriter(rw, w.writeTimeout); dw.arm() == nil {
		w.fdw = dw
	}
	switch {
	case w.sw != nil:
		if !w.sw.Done() && w.werr == nil {
			_ = w.sw.Fail(anthropicapi.NewError(http.StatusBadGateway, "The stream ended before the answer was complete."))
		}
	case w.status == 0 && w.held.Len() == 0:
		// Nothing was answered (the client left before): nothing to send.
	case w.Status() >= 400:
		e := anthropicapi.FromOpenAIError(w.Status(), w.held.Bytes())
		w.passHeaders(errorHeaders[:]...)
		anthropicapi.WriteError(rw, w.requestID, e)
	case w.req == nil || w.overflow:
		anthropicapi.WriteError(rw, w.requestID, anthropicapi.NewError(http.StatusBadGateway, "The provider's answer could not be converted."))
	case w.upstreamError():
		// An error document with a success status: the upstream's error.
	case w.streaming():
		// A whole answer to a stream request (see wholeAnswer).
		sw := w.newStreamWriter()
		if err := sw.Whole(w.held.Bytes()); errors.Is(err, anthropicapi.ErrMalformedUpstream) {
			if sw.Started() {
				_ = sw.Fail(anthropicapi.NewError(http.StatusBadGateway, "The provider's answer could not be converted."))
			} else {
				anthropicapi.WriteError(rw, w.requestID, anthropicapi.NewError(http.StatusBadGateway, "The provider's answer could not be converted."))
				return
			}
		}
		rw.Flush()
	default:
		var out []byte
		var err error
		if w.req.ThinkingOmitted {
			out, err = anthropicapi.RenderMessageOmitted(w.held.Bytes(), w.req.Model, w.req.StopSequences, w.promptTokens)
		} else {
			out, err = anthropicapi.RenderMessage(w.held.Bytes(), w.req.Model, w.req.StopSequences, w.promptTokens, w.req.Thinking)
		}
		if err != nil {
			anthropicapi.WriteError(rw, w.requestID, anthropicapi.NewError(http.StatusBadGateway, "The provider's answer could not be converted."))
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("request-id", w.requestID)
		rw.WriteHeader(http.StatusOK)
		if w.fdw != nil {
			_ = w.fdw.writeWhole(out)
		} else {
			_, _ = rw.Write(out)
		}
	}
}
