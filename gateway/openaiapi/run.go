package openaiapi

import (
	"bytes"
	"crypto/rand"
	"io"
	"strings"
	"time"

	"github.com/iop-gateway/iop/internal/jsonenc"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// RunEvent metadata keys (the node's adapter.MetaToolCalls and
// adapter.MetaTextToolFallback; a test keeps them in sync).
const (
	MetaToolCalls        = "openai_tool_calls"
	MetaTextToolFallback = "openai_text_tool_fallback"
)

// RenderOptions configure the rendering of one run as an OpenAI response.
// The Parse* results offer a RenderOptions() method that fills the
// request-derived fields.
type RenderOptions struct {
	// Model is the `model` a rendered response carries: the provider's
	// target, as the tunnel route's responses carry it from the upstream,
	// so one model answers with one value whatever the route.
	Model string
	// ID is the response id; empty means a fresh "chatcmpl-…" / "cmpl-…".
	ID string
	// Created is the unix time in seconds; 0 means now.
	Created int64
	// IncludeUsage adds the trailing usage chunk to a stream.
	IncludeUsage bool
	// ToolNames are the function names whose text tool calls are restored
	// (and streamed text held for them): those the request offered, as its
	// tool_choice allows (ChatRequest.RenderOptions). None when empty.
	ToolNames []string
	// SingleToolCall (parallel_tool_calls false) restores at most one text
	// tool call: the first. Later blocks that are valid calls are dropped,
	// neither tool calls nor content (see ParseTextToolCalls). Native tool
	// calls are the provider's and are never cut.
	SingleToolCall bool
	// PromptTokens is the prompt estimate reported as usage when the run
	// reports none.
	PromptTokens int
	// OnFirstWrite, if set, is called once, right before a stream writer
	// writes its first byte: the handler's cue to commit the 200 and the SSE
	// headers (and to observe time to first token). Until then a failed run
	// can still be answered with an ordinary HTTP error.
	OnFirstWrite func()
}

func (o *RenderOptions) fill(idPrefix string) {
	if o.ID == "" {
		o.ID = idPrefix + randomAlnum(29)
	}
	if o.Created == 0 {
		o.Created = time.Now().Unix()
	}
}

// Usage is the token usage of a rendered response.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// runState folds a run's events into what every renderer needs: merged
// metadata (it may arrive on any event), the last reported usage, and how
// the run ended.
type runState struct {
	// The metadata the renderers read (see MetaToolCalls), the last value
	// reported for each; other keys are not kept, so a node that sends
	// many cannot grow this.
	toolCalls string
	fallback  bool
	usage     *iop.Usage
	finish    string
	output    []byte
	terminal  iop.RunEventType // UNSPECIFIED until a terminal event
	runErr    *iop.RunError
	sawText   bool // a DELTA with non-empty text arrived
	// sawReasoning: a DELTA with non-empty reasoning arrived. It counts as
	// an answer (see empty) only with countReasoning, set by the renderers
	// that show reasoning (chat).
	sawReasoning   bool
	countReasoning bool
	// oversized: the answer outgrew MaxAnswerBytes. The state is done, but
	// the run is not: it is abandoned (see aggregation.Abandoned).
	oversized bool
}

// observe merges ev and reports whether it was the terminal event. Events
// after the terminal one are ignored (the wire promises there are none).
func (s *runState) observe(ev *iop.RunEvent) (terminal bool) {
	if ev == nil || s.done() {
		return false
	}
	if m := ev.GetMetadata(); len(m) > 0 {
		if v, ok := m[MetaToolCalls]; ok {
			s.toolCalls = v
		}
		if v, ok := m[MetaTextToolFallback]; ok {
			s.fallback = v == "true"
		}
	}
	if u := ev.GetUsage(); u != nil {
		s.usage = u
	}
	switch t := ev.GetType(); t {
	case iop.RunEventType_RUN_EVENT_TYPE_DELTA:
		s.sawText = s.sawText || ev.GetDelta() != ""
		s.sawReasoning = s.sawReasoning || ev.GetReasoning() != ""
	case iop.RunEventType_RUN_EVENT_TYPE_COMPLETE:
		s.finish = ev.GetFinishReason()
		s.output = ev.GetOutput()
		s.terminal = t
		return true
	case iop.RunEventType_RUN_EVENT_TYPE_ERROR, iop.RunEventType_RUN_EVENT_TYPE_CANCELLED:
		s.runErr = ev.GetError()
		s.terminal = t
		return true
	}
	return false
}

func (s *runState) done() bool {
	return s.terminal != iop.RunEventType_RUN_EVENT_TYPE_UNSPECIFIED || s.oversized
}

// textFallback reports whether the adapter fell back to text tool calls.
func (s *runState) textFallback() bool { return s.fallback }

// failure is the caller-facing error of a run that did not complete, or nil.
//
// The empty-run rule: a run that ended COMPLETE without any text (no DELTA
// with content), without tool calls (metadata openai_tool_calls), without
// output (embeddings) and without usage is an upstream_error, not a
// success. Nothing in it shows the provider produced an answer: it is what
// a garbage or truncated upstream body looks like once an adapter failed to
// notice, and rendering it as 200 {"content":"","finish_reason":"stop"}
// would hide the fault from the caller. A provider that legitimately
// generated nothing still reports usage, so its empty answer stands. Every
// aggregator and stream renderer goes through here, so the rule holds on
// every run route; a stream writer reports it before the first byte (a
// plain 502) because an empty run never writes anything earlier.
func (s *runState) failure() *Error {
	if s.oversized {
		return errAnswerTooLarge()
	}
	switch s.terminal {
	case iop.RunEventType_RUN_EVENT_TYPE_COMPLETE:
		if s.empty() {
			return errEmptyRun()
		}
		return nil
	case iop.RunEventType_RUN_EVENT_TYPE_ERROR:
		return FromRunError(s.runErr)
	case iop.RunEventType_RUN_EVENT_TYPE_CANCELLED:
		return errCancelled()
	default:
		return errNoTerminal()
	}
}

// empty reports a completed run with nothing to show for it (see failure).
func (s *runState) empty() bool {
	return !s.sawText && !(s.countReasoning && s.sawReasoning) && s.toolCalls == "" && len(s.output) == 0 && s.usage == nil
}

// finalUsage is the usage to report: the provider's when it reported any,
// otherwise estimates (prompt from the request, completion from the bytes
// generated). reported tells the two apart for metrics.
func (s *runState) finalUsage(promptEstimate, completionBytes int) (u Usage, reported bool) {
	if s.usage != nil {
		u = Usage{
			PromptTokens:     s.usage.GetPromptTokens(),
			CompletionTokens: s.usage.GetCompletionTokens(),
			TotalTokens:      s.usage.GetTotalTokens(),
		}
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		return u, true
	}
	u.PromptTokens = int64(promptEstimate)
	u.CompletionTokens = int64(EstimateTokens(completionBytes, 0))
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u, false
}

// finishReason is the reason to report: OpenAI's "length" or
// "content_filter" when the provider's reason is one of them (or a
// vendor's name for "length"), even with tool calls emitted — an answer
// cut short may have cut a call's arguments, and OpenAI reports "length"
// with the partial calls so that an agent loop does not run them; else
// "tool_calls" exactly when tool calls are emitted (SDKs branch on it);
// else "stop". Typed SDKs decode finish_reason into a closed enum (the
// official .NET one throws on any other value), and a provider behind an
// OpenAI-compatible server may say anything: vLLM "abort", TGI
// "eos_token" or "stop_sequence", others "max_tokens" or "model_length"
// for what OpenAI calls "length".
func finishReason(provider string, hasToolCalls bool) string {
	switch provider {
	case "length", "max_tokens", "model_length", "max_length":
		return "length"
	case "content_filter":
		return provider
	}
	if hasToolCalls {
		return "tool_calls"
	}
	return "stop"
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomAlnum returns n random alphanumeric characters from crypto/rand, so
// ids are unguessable across requests.
func randomAlnum(n int) string {
	const unbiased = 256 - 256%len(alnum) // reject bytes that would skew the modulo
	out := make([]byte, 0, n)
	var b [64]byte
	for len(out) < n {
		if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
			panic("openaiapi: crypto/rand failed: " + err.Error())
		}
		for _, c := range b {
			if int(c) < unbiased && len(out) < n {
				out = append(out, alnum[int(c)%len(alnum)])
			}
		}
	}
	return string(out)
}

// sseWriter writes whole SSE events and tracks whether anything went out.
type sseWriter struct {
	w       io.Writer
	flush   func()
	onFirst func()
	started bool
	buf     []byte
	err     error // first write error; writes stop after it
}

// event appends `data: <payload>\n\n` to the pending batch.
func (s *sseWriter) event(payload []byte) {
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, "\n\n"...)
}

func (s *sseWriter) raw(b []byte) { s.buf = append(s.buf, b...) }

// textEvent appends `data: <p's chunk carrying text t>\n\n`.
func (s *sseWriter) textEvent(p *textSplice, t string) {
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, p.head...)
	s.buf = jsonenc.AppendString(s.buf, t)
	s.buf = append(s.buf, p.tail...)
	s.buf = append(s.buf, "\n\n"...)
}

// textSplice is a stream's text chunk encoded once with its text cut out.
// The text chunks of one stream differ in nothing else, so each is written
// as head, the text encoded (jsonenc.AppendString), tail, instead of a
// struct marshalled (five allocations) per chunk. FuzzTextSplice holds the
// result to the marshalled chunk.
type textSplice struct{ head, tail []byte }

// spliceMark is the text a splice's template is encoded with. Its encoding
// is looked for from the end: the text comes after the id and the model,
// which may hold anything, and before nothing but constants.
const spliceMark = "\x00"

var spliceMarkJSON = []byte(`"\u0000"`)

// newTextSplice cuts template, a chunk encoded with spliceMark as its text.
func newTextSplice(template []byte) textSplice {
	i := bytes.LastIndex(template, spliceMarkJSON)
	if i < 0 {
		panic("openaiapi: text splice template has no mark: " + string(template))
	}
	return textSplice{head: template[:i:i], tail: template[i+len(spliceMarkJSON):]}
}

// ready reports whether the splice has been made.
func (p *textSplice) ready() bool { return p.head != nil }

// send writes the pending batch in one Write and flushes it, so every event
// reaches the client as soon as it is produced.
func (s *sseWriter) send() error {
	if s.err != nil || len(s.buf) == 0 {
		s.buf = s.buf[:0]
		return s.err
	}
	if !s.started {
		s.started = true
		if s.onFirst != nil {
			s.onFirst()
		}
	}
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		s.err = err
		return err
	}
	if s.flush != nil {
		s.flush()
	}
	return nil
}

var doneEvent = []byte("data: [DONE]\n\n")

// aggregation is what the non-stream renderers share: the run's folded state,
// its text, and the rendered result (computed once).
type aggregation struct {
	opts RenderOptions
	st   runState
	text strings.Builder
	// reasoning is the run's reasoning text, kept only when st.countReasoning
	// (chat): other operations have nowhere to show it.
	reasoning strings.Builder

	rendered bool
	body     []byte
	err      *Error
	usage    Usage
	reported bool
	finish   string
}

// Add consumes one event and reports whether it was the terminal one.
func (a *aggregation) Add(ev *iop.RunEvent) (done bool) {
	if a.st.done() || ev == nil {
		return a.st.done()
	}
	if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		r := ev.GetReasoning()
		if !a.st.countReasoning {
			r = ""
		}
		if a.text.Len()+a.reasoning.Len()+len(ev.GetDelta())+len(r) > MaxAnswerBytes {
			a.st.oversized = true
			return true
		}
		a.text.WriteString(ev.GetDelta())
		a.reasoning.WriteString(r)
	}
	return a.st.observe(ev)
}

// MaxAnswerBytes bounds the text (a chat answer's reasoning included) of a
// non-streamed answer held for rendering: as much as one wire frame carries,
// and far more than any model's context (16 MiB is some four million
// tokens). Past it the answer is an upstream_error and the run is abandoned;
// a node or upstream that never stops cannot grow the edge's memory.
const MaxAnswerBytes = 16 << 20

// Done reports whether the terminal event has been seen, or the answer was
// abandoned.
func (a *aggregation) Done() bool { return a.st.done() }

// Abandoned reports that Add stopped before the run's terminal event
// because the answer outgrew MaxAnswerBytes: the run is still going, and
// its caller must cancel it.
func (a *aggregation) Abandoned() bool { return a.st.oversized }

// Usage returns the usage of the rendered response (valid after Result) and
// whether the provider reported it (false: estimated).
func (a *aggregation) Usage() (Usage, bool) { return a.usage, a.reported }

// FinishReason returns the reported finish_reason (valid after a successful
// Result).
func (a *aggregation) FinishReason() string { return a.finish }
