package openaiapi

import (
	"encoding/json"
	"io"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Wire shapes of chat.completion.chunk, as OpenAI streams them.
type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	// With include_usage OpenAI puts "usage":null on every chunk and the
	// figures on a last chunk with empty choices; without it, no usage key.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Reasoning *string         `json:"reasoning,omitempty"` // ReasoningField
	ToolCalls []chunkToolCall `json:"tool_calls,omitempty"`
}

type chunkToolCall struct {
	Index    int          `json:"index"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

var nullJSON = json.RawMessage("null")

// ChatStreamWriter renders a streamed chat run as chat.completion.chunk SSE
// events on w, calling flush after every batch so nothing waits in a buffer.
// Not safe for concurrent use.
//
// The stream is: a chunk with delta {role:"assistant",content:""}; content
// chunks as deltas arrive, and reasoning chunks (delta {"reasoning":…},
// ReasoningField) as reasoning arrives, in the order the run sent them;
// one chunk per tool call (delta.tool_calls with index, id, type,
// function{name, arguments}); a chunk with an empty delta
// and the finish_reason; with include_usage a chunk with empty choices and
// the usage; then `data: [DONE]`. A run failing after the first byte ends
// with `data: {"error":…}` and no [DONE].
//
// Nothing is written before there is something to say (content, reasoning,
// tool calls or the successful end), so a run failing early can still be
// answered with an HTTP error status: Add then returns that *Error and
// writes nothing.
//
// When the request offered tools, text that might be a text tool call
// ("<tool_call>" and partial prefixes of it) is held until it can be decided;
// see toolHolder. All other text is released immediately, and so is
// reasoning (never a tool call), except reasoning that comes while such
// text is held: it follows that text out, in the order the model produced
// them. Deltas are proto3 strings and so whole UTF-8
// runes; the writer never splits one.
type ChatStreamWriter struct {
	opts      RenderOptions
	st        runState
	sse       sseWriter
	holder    *toolHolder // nil when the request offered no tools
	roleSent  bool
	content   textSplice // the content chunk, made for the first text
	reasoning textSplice // the reasoning chunk, made for the first reasoning
	toolIndex int
	outBytes  int // content, reasoning and tool-call bytes sent, for usage estimates
	failure   *Error
	finish    string
	usage     Usage
	reported  bool
	closed    bool // terminal handled (or Abort)
}

// NewChatStreamWriter prepares a writer; it writes nothing yet. flush may be
// nil.
func NewChatStreamWriter(w io.Writer, flush func(), opts RenderOptions) *ChatStreamWriter {
	opts.fill("chatcmpl-")
	s := &ChatStreamWriter{opts: opts, sse: sseWriter{w: w, flush: flush, onFirst: opts.OnFirstWrite}}
	s.st.countReasoning = true
	if len(opts.ToolNames) > 0 {
		s.holder = newToolHolder(opts.ToolNames)
		s.holder.single = opts.SingleToolCall
	}
	return s
}

// Add consumes one run event and writes what it produces. It returns:
//   - nil: go on (check Done after a terminal event);
//   - an *Error: the run failed before anything was written; nothing has
//     been written now either, so answer with e.Status and e.Envelope();
//   - any other error: writing to the client failed (cancel the run).
//
// Events after the terminal one are ignored.
func (s *ChatStreamWriter) Add(ev *iop.RunEvent) error {
	if s.closed || ev == nil {
		return nil
	}
	terminal := s.st.observe(ev)
	native := s.st.toolCalls != ""
	if s.holder != nil && !s.holder.marked && s.st.textFallback() && !native {
		// The mark may come on any event; act on it before this event's
		// text. What it releases came before this event's reasoning, which
		// is written at once when nothing is held: it goes out first.
		s.holder.mark()
		s.drainHolder()
	}
	if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		// Reasoning first: when an event carries both, the model thought
		// before it answered.
		if r := ev.GetReasoning(); r != "" {
			if s.holder != nil && s.holder.holdsText() {
				// Text before it is held (it may be a tool call): the
				// reasoning waits behind it, in the model's order.
				s.holder.pushReasoning(r)
			} else {
				s.reason(r)
			}
		}
		if d := ev.GetDelta(); d != "" {
			if s.holder != nil {
				s.holder.push(d)
			} else {
				s.text(d)
			}
		}
	}
	s.drainHolder()
	if !terminal {
		return s.sse.send()
	}
	s.closed = true
	if e := s.st.failure(); e != nil {
		return s.fail(e)
	}
	var nativeCalls []ToolCall
	if native {
		var err error
		if nativeCalls, err = parseNativeToolCalls(s.st.toolCalls); err != nil {
			return s.fail(UpstreamError("The provider returned malformed tool calls."))
		}
	}
	if s.holder != nil {
		if len(nativeCalls) > 0 {
			s.holder.dropBlank()
		}
		s.holder.finish(s.st.textFallback() && !native)
		s.drainHolder()
	}
	s.calls(nativeCalls)
	s.ensureRole()
	s.finish = finishReason(s.st.finish, s.toolIndex > 0)
	s.chunk(chunkDelta{}, &s.finish)
	s.usage, s.reported = s.st.finalUsage(s.opts.PromptTokens, s.outBytes)
	if s.opts.IncludeUsage {
		s.sse.event(mustMarshal(chatChunk{
			ID: s.opts.ID, Object: "chat.completion.chunk", Created: s.opts.Created, Model: s.opts.Model,
			Choices: []chunkChoice{}, Usage: mustMarshal(s.usage),
		}))
	}
	s.sse.raw(doneEvent)
	return s.sse.send()
}

// Abort ends the stream with e when the run cannot deliver its terminal
// event (the node was lost, an edge-side deadline passed). Before the first
// byte it writes nothing and returns e for an ordinary HTTP error; after, it
// writes the SSE error event (no [DONE]) and returns the write error, if
// any. It does nothing once the stream has ended.
func (s *ChatStreamWriter) Abort(e *Error) error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.fail(e)
}

func (s *ChatStreamWriter) fail(e *Error) error {
	s.failure = e
	s.usage, s.reported = s.st.finalUsage(s.opts.PromptTokens, s.outBytes)
	if !s.sse.started {
		s.sse.buf = s.sse.buf[:0] // e.g. text released by this very event
		return e
	}
	s.sse.raw(SSEErrorEvent(e))
	return s.sse.send()
}

// Started reports whether any byte has been written.
func (s *ChatStreamWriter) Started() bool { return s.sse.started }

// Done reports whether the stream has ended (terminal event or Abort).
func (s *ChatStreamWriter) Done() bool { return s.closed }

// Failure is the error the run ended with, or nil.
func (s *ChatStreamWriter) Failure() *Error { return s.failure }

// FinishReason is the finish_reason sent (after a successful end).
func (s *ChatStreamWriter) FinishReason() string { return s.finish }

// Usage returns the usage of the run (valid once Done) and whether the
// provider reported it (false: estimated).
func (s *ChatStreamWriter) Usage() (Usage, bool) { return s.usage, s.reported }

func (s *ChatStreamWriter) drainHolder() {
	if s.holder == nil {
		return
	}
	for i, a := range s.holder.ahead {
		s.text(a.text)
		s.calls(a.calls)
		s.reason(a.reasoning)
		s.holder.ahead[i] = heldOut{}
	}
	s.holder.ahead = s.holder.ahead[:0]
	text, calls := s.holder.take()
	s.text(text)
	s.calls(calls)
}

func (s *ChatStreamWriter) ensureRole() {
	if s.roleSent {
		return
	}
	s.roleSent = true
	empty := ""
	s.chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
}

func (s *ChatStreamWriter) text(t string) {
	if t == "" {
		return
	}
	s.ensureRole()
	s.outBytes += len(t)
	if !s.content.ready() {
		mark := spliceMark
		s.content = newTextSplice(s.encodeChunk(chunkDelta{Content: &mark}, nil))
	}
	s.sse.textEvent(&s.content, t)
}

// reason writes a reasoning chunk; see text.
func (s *ChatStreamWriter) reason(t string) {
	s.ensureRole()
	s.outBytes += len(t)
	if !s.reasoning.ready() {
		mark := spliceMark
		s.reasoning = newTextSplice(s.encodeChunk(chunkDelta{Reasoning: &mark}, nil))
	}
	s.sse.textEvent(&s.reasoning, t)
}

func (s *ChatStreamWriter) calls(calls []ToolCall) {
	for _, c := range calls {
		s.ensureRole()
		s.outBytes += len(c.Function.Name) + len(c.Function.Arguments)
		s.chunk(chunkDelta{ToolCalls: []chunkToolCall{{
			Index: s.toolIndex, ID: c.ID, Type: c.Type, Function: c.Function,
		}}}, nil)
		s.toolIndex++
	}
}

func (s *ChatStreamWriter) chunk(d chunkDelta, finish *string) {
	s.sse.event(s.encodeChunk(d, finish))
}

func (s *ChatStreamWriter) encodeChunk(d chunkDelta, finish *string) []byte {
	c := chatChunk{
		ID: s.opts.ID, Object: "chat.completion.chunk", Created: s.opts.Created, Model: s.opts.Model,
		Choices: []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}},
	}
	if s.opts.IncludeUsage {
		c.Usage = nullJSON
	}
	return mustMarshal(c)
}
