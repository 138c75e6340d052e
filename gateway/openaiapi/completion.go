package openaiapi

import (
	"encoding/json"
	"io"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Wire shape of the legacy text_completion object; streams send the same
// object type per chunk.
type textCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	// As for chat chunks: null on every chunk with include_usage, the
	// figures on the last one; always present on the non-stream object.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type textChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// CompletionAggregator renders a non-stream legacy completion run as one
// text_completion. Use like ChatAggregator. Not safe for concurrent use.
type CompletionAggregator struct {
	aggregation
	// thought is the reasoning bytes the run generated: not shown, but
	// counted in an estimated usage, as chat's (OpenAI counts reasoning
	// tokens in completion_tokens).
	thought int
}

// NewCompletionAggregator starts the rendering of one run.
func NewCompletionAggregator(opts RenderOptions) *CompletionAggregator {
	opts.fill("cmpl-")
	return &CompletionAggregator{aggregation: aggregation{opts: opts}}
}

// Add consumes one event and reports whether it was the terminal one.
func (a *CompletionAggregator) Add(ev *iop.RunEvent) (done bool) {
	if !a.st.done() && ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		a.thought += len(ev.GetReasoning())
	}
	return a.aggregation.Add(ev)
}

// Result returns the text_completion JSON or the *Error to answer with (see
// ChatAggregator.Result). Calling it again returns the same result.
func (a *CompletionAggregator) Result() ([]byte, *Error) {
	if a.rendered {
		return a.body, a.err
	}
	a.rendered = true
	a.usage, a.reported = a.st.finalUsage(a.opts.PromptTokens, a.text.Len()+a.thought)
	if a.err = a.st.failure(); a.err != nil {
		return nil, a.err
	}
	a.finish = finishReason(a.st.finish, false)
	a.body = mustMarshal(textCompletion{
		ID: a.opts.ID, Object: "text_completion", Created: a.opts.Created, Model: a.opts.Model,
		Choices: []textChoice{{Text: a.text.String(), FinishReason: &a.finish}},
		Usage:   mustMarshal(a.usage),
	})
	return a.body, nil
}

// CompletionStreamWriter renders a streamed legacy completion run as SSE
// text_completion chunks: one per delta, a last one with empty text and the
// finish_reason, the usage chunk (empty choices) when include_usage, then
// [DONE]. Its contract (first byte, errors, Abort) is ChatStreamWriter's.
//
// A completion shows no reasoning, but a model thinking before it answers
// starts the stream as a chat stream does: the first reasoning writes a
// chunk with empty text, and so does every HiddenReasoningKeepAliveBytes of
// reasoning dropped since the stream last wrote. A run that fails after
// that ends with the error event, as any started stream does.
type CompletionStreamWriter struct {
	opts     RenderOptions
	st       runState
	sse      sseWriter
	outBytes int        // text and reasoning bytes generated, for usage estimates
	hidden   int        // reasoning bytes dropped since the stream last wrote
	text     textSplice // the text chunk, made for the first delta or reasoning
	failure  *Error
	finish   string
	usage    Usage
	reported bool
	closed   bool
}

// NewCompletionStreamWriter prepares a writer; it writes nothing yet.
func NewCompletionStreamWriter(w io.Writer, flush func(), opts RenderOptions) *CompletionStreamWriter {
	opts.fill("cmpl-")
	return &CompletionStreamWriter{opts: opts, sse: sseWriter{w: w, flush: flush, onFirst: opts.OnFirstWrite}}
}

// Add consumes one run event; its results are those of ChatStreamWriter.Add.
func (s *CompletionStreamWriter) Add(ev *iop.RunEvent) error {
	if s.closed || ev == nil {
		return nil
	}
	terminal := s.st.observe(ev)
	if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		d, r := ev.GetDelta(), ev.GetReasoning()
		// Reasoning is generated output too, shown or not.
		s.outBytes += len(d) + len(r)
		if d != "" {
			s.hidden = 0
			s.textChunk(d)
		} else if r != "" {
			s.think(len(r))
		}
	}
	if !terminal {
		return s.sse.send()
	}
	s.closed = true
	s.usage, s.reported = s.st.finalUsage(s.opts.PromptTokens, s.outBytes)
	if e := s.st.failure(); e != nil {
		return s.fail(e)
	}
	s.finish = finishReason(s.st.finish, false)
	s.chunk("", &s.finish)
	if s.opts.IncludeUsage {
		s.sse.event(mustMarshal(textCompletion{
			ID: s.opts.ID, Object: "text_completion", Created: s.opts.Created, Model: s.opts.Model,
			Choices: []textChoice{}, Usage: mustMarshal(s.usage),
		}))
	}
	s.sse.raw(doneEvent)
	return s.sse.send()
}

// Abort ends the stream with e; see ChatStreamWriter.Abort.
func (s *CompletionStreamWriter) Abort(e *Error) error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.usage, s.reported = s.st.finalUsage(s.opts.PromptTokens, s.outBytes)
	return s.fail(e)
}

func (s *CompletionStreamWriter) fail(e *Error) error {
	s.failure = e
	if !s.sse.started {
		s.sse.buf = s.sse.buf[:0]
		return e
	}
	s.sse.raw(SSEErrorEvent(e))
	return s.sse.send()
}

// Started reports whether any byte has been written.
func (s *CompletionStreamWriter) Started() bool { return s.sse.started }

// Done reports whether the stream has ended.
func (s *CompletionStreamWriter) Done() bool { return s.closed }

// Failure is the error the run ended with, or nil.
func (s *CompletionStreamWriter) Failure() *Error { return s.failure }

// FinishReason is the finish_reason sent (after a successful end).
func (s *CompletionStreamWriter) FinishReason() string { return s.finish }

// Usage returns the usage (valid once Done) and whether it was reported.
func (s *CompletionStreamWriter) Usage() (Usage, bool) { return s.usage, s.reported }

// HiddenReasoningKeepAliveBytes is how much reasoning a completion stream
// drops between two empty-text chunks, as anthropicapi's
// HiddenThinkingPingBytes between two pings: some 500 tokens, seconds of a
// model's output. A model that thinks for minutes before it answers would
// otherwise leave the client without a byte all that time, and a proxy's
// or client's read timeout (nginx: 60 s) would cut the answer before its
// text.
//
// The keep-alive is a chunk, not an SSE comment: every OpenAI SDK reads a
// chunk with empty text (each stream ends with one), while go-openai counts
// comment lines against its limit of 300 empty lines between two chunks
// (ErrTooManyEmptyStreamMessages) and parses a later error event together
// with the comments before it, losing the error.
const HiddenReasoningKeepAliveBytes = 2048

// think handles n bytes of reasoning, which a completion does not show
// (Add counts them in an estimated usage, as chat does: OpenAI counts
// reasoning tokens in completion_tokens), on a delta without text.
func (s *CompletionStreamWriter) think(n int) {
	if s.hidden += n; s.sse.started && s.hidden < HiddenReasoningKeepAliveBytes {
		return
	}
	s.hidden = 0
	s.textChunk("")
}

// textChunk appends the chunk carrying text t.
func (s *CompletionStreamWriter) textChunk(t string) {
	if !s.text.ready() {
		s.text = newTextSplice(s.encodeChunk(spliceMark, nil))
	}
	s.sse.textEvent(&s.text, t)
}

func (s *CompletionStreamWriter) chunk(text string, finish *string) {
	s.sse.event(s.encodeChunk(text, finish))
}

func (s *CompletionStreamWriter) encodeChunk(text string, finish *string) []byte {
	c := textCompletion{
		ID: s.opts.ID, Object: "text_completion", Created: s.opts.Created, Model: s.opts.Model,
		Choices: []textChoice{{Text: text, FinishReason: finish}},
	}
	if s.opts.IncludeUsage {
		c.Usage = nullJSON
	}
	return mustMarshal(c)
}
