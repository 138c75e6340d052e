package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
)

// Wire shapes of the Messages SSE events.
type startEvent struct {
	Type    string      `json:"type"`
	Message msgResponse `json:"message"`
}

type blockStartEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"` // textOut or toolUseOut
}

type blockDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"` // textDelta or inputJSONDelta
}

type textDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

// signatureDelta ends every thinking block: iop has no signature to
// give (see StreamWriter), and the empty one keeps the sequence clients
// expect, thinking deltas, then the signature, then the block's stop.
func signatureDelta(index int) blockDeltaEvent {
	return blockDeltaEvent{Type: "content_block_delta", Index: index, Delta: signatureDeltaOut{Type: "signature_delta"}}
}

type signatureDeltaOut struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

type inputJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type blockStopEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDeltaEvent struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage deltaUsage `json:"usage"`
}

// deltaUsage carries input_tokens only when the upstream reported them:
// the figure message_start carried was the edge's estimate.
type deltaUsage struct {
	InputTokens  *int `json:"input_tokens,omitempty"`
	OutputTokens int  `json:"output_tokens"`
}

var (
	eventMessageStop = []byte(`{"type":"message_stop"}`)
	eventPing        = []byte(`{"type":"ping"}`)
	doneMarker       = []byte("[DONE]")
)

type openBlock uint8

const (
	openNone openBlock = iota
	openText
	openTool
	openThinking
)

// functionCallIndex is the tool index a legacy delta.function_call streams
// under (OpenAI tool call indexes are never negative).
const functionCallIndex = -1

// StreamWriter translates an OpenAI chat.completion.chunk stream into the
// Messages SSE stream:
//
//	event: message_start        message with empty content, usage.input_tokens
//	event: content_block_start  text {"text":""}, tool_use {id,name,input:{}}
//	                            or thinking {"thinking":"","signature":""}
//	event: content_block_delta  text_delta, input_json_delta or
//	                            thinking_delta, per fragment; a thinking
//	                            block's last delta is a signature_delta
//	event: content_block_stop
//	…                           further blocks, indexes increasing from 0
//	event: message_delta        stop_reason, stop_sequence, usage.output_tokens
//	event: message_stop
//
// or, on failure, the events so far followed by `event: error` and nothing
// else. Each event is `event: NAME\ndata: JSON\n\n`, flushed on its own.
// Only one block is open at a time: a text delta after a tool call opens a
// new text block, a new tool call index opens a new tool_use block (the
// open call's block closes), except while another call's block is open
// with arguments that are not yet a whole JSON object or array, or calls
// are held: then the new call is held and written whole, in index order,
// once that block closes (OpenAI streams
// may interleave parallel calls' fragments; held calls and held reasoning
// together at most MaxHeldThinkingBytes, pinging as hidden thinking does);
// reasoning between a tool call's fragments is held and shown as a
// thinking block once the call's block closes (at most
// MaxHeldThinkingBytes). Only choice 0 is translated. Not safe for
// concurrent use.
//
// Reasoning (delta "reasoning", or "reasoning_content") becomes thinking
// blocks when the request enabled thinking, and is dropped otherwise, as
// Anthropic sends no thinking unless asked (a ping for every
// HiddenThinkingPingBytes of it keeps the stream alive); it counts in the
// output estimate either way. A thinking block's signature is Anthropic's
// proof that its own model produced the thinking; no other backend can give
// one, so it is empty. A client that sends the block back gets it dropped by
// the edge (see ParseRequest); Anthropic's API would refuse it.
//
// message_start is written with the first event there is (content, Ping,
// Finish), so until then the caller can still answer with an HTTP error
// (see Started).
type StreamWriter struct {
	w             io.Writer
	flush         func()
	id, model     string
	inputTokens   int
	stopSequences []string
	thinking      bool // render reasoning as thinking blocks
	omit          bool // thinking blocks without their text (OmitThinking)

	started    bool // a byte was written (or a write attempted)
	msgStarted bool // message_start written
	closed     bool // message_stop or error written
	err        error
	failure    *Error

	next      int          // index of the next content block
	open      openBlock    // kind of the open block
	curTool   int          // OpenAI index of the open tool_use block
	curArgs   argScan      // the open tool_use block's arguments so far
	toolsSeen map[int]bool // OpenAI indexes whose tool_use block was opened

	finish     *string
	vllmStop   json.RawMessage
	usage      *oaUsage
	outBytes   int
	hidden     int // reasoning bytes dropped since the last hidden-thinking ping
	stopReason string

	// Reasoning that came while a tool_use block was open (holdThinking):
	// owed is whether a thinking block is owed once that block closes,
	// held its text (none when omitted), at most MaxHeldThinkingBytes.
	owed bool
	held []byte

	// Tool calls that started while another call's block was open (see
	// tool), by OpenAI index: written whole, in index order, once that
	// block closes. heldTools is what they hold (names and arguments,
	// heldToolCost each besides), counted with held against
	// MaxHeldThinkingBytes; nil map until the first is held.
	pendingTools map[int]*heldTool
	heldTools    int
}

// heldTool is a tool call held while another call's block is open.
type heldTool struct {
	id, name string
	args     []byte
}

// heldToolCost is what a held call costs besides its name and arguments
// (its map entry and struct), so that many calls with one-byte names
// cannot hold more memory than the bound says.
const heldToolCost = 64

// NewStreamWriter prepares a writer; it writes nothing yet. flush (may be
// nil) is called after every event. model is message_start's model unless
// the upstream's first chunk names one (answeredBy). inputTokens is the
// prompt estimate message_start reports (e.g. CountTokens); stopSequences
// are the request's; thinking is whether the request enabled thinking
// (Request.Thinking).
func NewStreamWriter(w io.Writer, flush func(), model string, inputTokens int, stopSequences []string, thinking bool) *StreamWriter {
	return &StreamWriter{
		w: w, flush: flush, id: newID("msg_"), model: model,
		inputTokens: max(inputTokens, 0), stopSequences: stopSequences,
		thinking:  thinking,
		toolsSeen: map[int]bool{},
	}
}

// OmitThinking makes the thinking blocks of a request that enabled
// thinking carry no text (Request.ThinkingOmitted), as Anthropic streams
// them with display "omitted": content_block_start, the signature_delta,
// content_block_stop, and no thinking_delta. The reasoning still counts in
// the output estimate, and a ping for every HiddenThinkingPingBytes of it
// keeps the stream alive while the model thinks. Call it before Chunk.
func (s *StreamWriter) OmitThinking() { s.omit = true }

// Chunk translates one OpenAI SSE data payload. A payload of [DONE] is
// Finish; a payload with an "error" member ends the stream with its
// translation (FromOpenAIError with status 0) as an error event, after
// the text of any choice beside it. It returns an error
// wrapping ErrMalformedUpstream for a payload it cannot translate (the
// caller should Fail with a 502 api_error), or the write error. Chunks after
// the end are ignored.
func (s *StreamWriter) Chunk(data []byte) error {
	if s.err != nil || s.closed {
		return s.err
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneMarker) {
		return s.Finish()
	}
	var c oaCompletion
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%w: chunk: %w", ErrMalformedUpstream, err)
	}
	if !s.msgStarted {
		var m oaModel
		_ = json.Unmarshal(data, &m) // it parsed above as a whole
		s.answeredBy(m.Model)
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	// An error beside choices (OpenRouter's mid-stream error: the text
	// that came with it, finish_reason "error") ends the stream with that
	// error after the text, so nothing the model wrote is lost; a chunk
	// of only an error (vLLM's, llama.cpp's) has no choice to convert. A
	// choice beside an error that cannot be converted does not hide the
	// error: the stream ends with the upstream's error, not a 502.
	failed := len(c.Error) > 0 && string(c.Error) != "null"
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if err := s.choice(ch); err != nil {
			if failed && errors.Is(err, ErrMalformedUpstream) {
				break
			}
			return err
		}
	}
	if failed {
		return s.Fail(FromOpenAIError(0, data))
	}
	return s.err
}

func (s *StreamWriter) choice(ch oaChoice) error {
	// Reasoning first: a chunk carrying both had its thinking before its
	// text (the run path sends them so).
	if r := ch.Delta.thinkingText(); r != "" {
		s.think(r)
	}
	if t := ch.Delta.Content; t != nil {
		s.text(*t)
	}
	for _, tc := range ch.Delta.ToolCalls {
		if err := s.tool(tc.Index, tc.ID, tc.Function); err != nil {
			return err
		}
	}
	if fc := ch.Delta.FunctionCall; fc != nil {
		if err := s.tool(functionCallIndex, "", *fc); err != nil {
			return err
		}
	}
	if ch.FinishReason != nil {
		s.finish = ch.FinishReason
	}
	if len(ch.StopReason) > 0 && string(ch.StopReason) != "null" {
		s.vllmStop = ch.StopReason
	}
	return nil
}

func (s *StreamWriter) text(t string) {
	if t == "" {
		return
	}
	if s.open != openText {
		s.closeBlock()
		s.startBlock(openText, textOut{Type: "text", Text: ""})
	}
	s.outBytes += len(t)
	s.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.next - 1, Delta: textDelta{Type: "text_delta", Text: t}})
}

// HiddenThinkingPingBytes is how much reasoning a stream without thinking
// drops between two pings: some 500 tokens, seconds of a model's output.
// A model that thinks for minutes before it answers would otherwise leave
// the stream silent all that time, and a proxy's or client's read timeout
// (nginx: 60 s) would cut the answer before its text.
const HiddenThinkingPingBytes = 2048

// MaxHeldThinkingBytes bounds the reasoning a stream holds back while a
// tool call's block is open (see think): past it the tool's block closes
// and the reasoning shows, and a later fragment of that call fails the
// stream as malformed, as it did before reasoning was held.
const MaxHeldThinkingBytes = 1 << 20

// heldBytes is what the stream holds back: reasoning inside a tool call
// and the tool calls held behind the open one.
func (s *StreamWriter) heldBytes() int { return len(s.held) + s.heldTools }

// think handles one piece of reasoning (see StreamWriter). Reasoning that
// comes while a tool call's block is open, between its fragments (an
// interleaved-thinking model may do so), is held and shown as a thinking
// block once that block closes: closing the tool's block for it would
// leave the call's later fragments without their block, which Messages
// cannot reopen. So with calls held behind the open one: closing it would
// write them whole before their last fragments came. It shows before the
// held calls. Held reasoning pings as dropped reasoning does.
func (s *StreamWriter) think(t string) {
	s.outBytes += len(t)
	held := false
	if s.thinking && s.open == openTool && s.heldBytes()+len(t) <= MaxHeldThinkingBytes {
		s.owed, held = true, true
		if !s.omit {
			s.held = append(s.held, t...)
		}
	} else if s.thinking && s.open != openThinking {
		s.closeBlock()
		s.startBlock(openThinking, thinkingOut{Type: "thinking"})
	}
	if !s.thinking || s.omit || held {
		// Dropped reasoning, and held reasoning (which writes nothing
		// until the call's block closes), keep the stream alive.
		s.keepAlive(len(t))
		return
	}
	s.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.next - 1, Delta: thinkingDelta{Type: "thinking_delta", Thinking: t}})
}

// keepAlive counts n bytes that wrote nothing (reasoning dropped or held,
// tool calls held) and pings for every HiddenThinkingPingBytes of them.
// Only a started stream is kept alive: before it, the caller may still
// answer with an HTTP error, and starts it itself.
func (s *StreamWriter) keepAlive(n int) {
	if s.hidden += n; s.hidden >= HiddenThinkingPingBytes && s.msgStarted {
		s.hidden = 0
		s.eventRaw("ping", eventPing)
	}
}

// tool handles one tool call fragment. The first fragment of an index opens
// its block and must carry the function name (OpenAI and vLLM send it
// there); later fragments add argument text. A new index closes the open
// call's block and streams live when that call's arguments are a whole
// JSON object or array (curArgs): vLLM and OpenAI send calls one after the
// other, and the client should see each as it comes. An index that starts
// while the open call is still incomplete, or while calls are held, is
// held (holdTool): OpenAI streams may interleave the fragments of
// parallel calls, and a Messages block cannot be reopened once closed.
func (s *StreamWriter) tool(index int, id string, f oaFunctionCall) error {
	if h := s.pendingTools[index]; h != nil {
		return s.holdTool(index, h, f.Arguments)
	}
	if s.open == openTool && s.curTool != index && !s.toolsSeen[index] && (len(s.pendingTools) > 0 || !s.curArgs.complete()) {
		if f.Name == "" {
			return fmt.Errorf("%w: tool call %d starts without a name", ErrMalformedUpstream, index)
		}
		if s.pendingTools == nil {
			s.pendingTools = map[int]*heldTool{}
		}
		if err := s.newTool(index); err != nil {
			return err
		}
		h := &heldTool{id: toolID(id), name: f.Name}
		s.outBytes += len(f.Name)
		s.heldTools += heldToolCost + len(f.Name)
		s.pendingTools[index] = h
		return s.holdTool(index, h, f.Arguments)
	}
	if s.open != openTool || s.curTool != index {
		if s.toolsSeen[index] {
			return fmt.Errorf("%w: tool call %d continued after its block closed", ErrMalformedUpstream, index)
		}
		if f.Name == "" {
			return fmt.Errorf("%w: tool call %d starts without a name", ErrMalformedUpstream, index)
		}
		if err := s.newTool(index); err != nil {
			return err
		}
		s.closeBlock()
		s.curTool, s.curArgs = index, argScan{}
		s.outBytes += len(f.Name)
		s.startBlock(openTool, toolUseOut{Type: "tool_use", ID: toolID(id), Name: f.Name, Input: emptyObject})
	}
	if f.Arguments != "" {
		s.curArgs.feed(f.Arguments)
		s.outBytes += len(f.Arguments)
		s.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.next - 1, Delta: inputJSONDelta{Type: "input_json_delta", PartialJSON: f.Arguments}})
	}
	return nil
}

// maxToolCalls bounds the tool calls one stream translates, as the node's
// adapters bound a run's (adapter.MaxToolCalls): every index started is
// remembered for the stream's life (toolsSeen), and an upstream that
// keeps starting calls is broken or hostile.
const maxToolCalls = 1024

// newTool records the start of call index, within maxToolCalls.
func (s *StreamWriter) newTool(index int) error {
	if len(s.toolsSeen) >= maxToolCalls {
		return fmt.Errorf("%w: more than %d tool calls", ErrMalformedUpstream, maxToolCalls)
	}
	s.toolsSeen[index] = true
	return nil
}

// argScan follows a tool call's argument text as it streams, in constant
// memory (the text itself is streamed, not kept), to tell whether it is a
// whole JSON object or array so far: the call is then over, and a new
// index after it is the next call rather than an interleaved one. It
// counts brackets outside strings without checking that they pair; a
// value it takes for whole that is not valid JSON was invalid anyway.
type argScan struct {
	state      uint8 // argsNone, argsOpen, argsWhole or argsOther
	depth      int   // open brackets
	inStr, esc bool  // inside a string; after its backslash
}

const (
	argsNone  = iota // only whitespace so far
	argsOpen         // an object or array not closed yet
	argsWhole        // an object or array closed, whitespace after it
	argsOther        // anything else: not known to be whole
)

// complete reports whether the text fed so far is one whole object or array.
func (a *argScan) complete() bool { return a.state == argsWhole }

func (a *argScan) feed(text string) {
	for i := 0; i < len(text) && a.state != argsOther; i++ {
		c := text[i]
		switch {
		case a.inStr:
			switch {
			case a.esc:
				a.esc = false
			case c == '\\':
				a.esc = true
			case c == '"':
				a.inStr = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case a.state == argsNone:
			a.state = argsOther
			if c == '{' || c == '[' {
				a.state, a.depth = argsOpen, 1
			}
		case a.state == argsWhole:
			a.state = argsOther // text after the value
		case c == '"':
			a.inStr = true
		case c == '{' || c == '[':
			a.depth++
		case c == '}' || c == ']':
			if a.depth--; a.depth == 0 {
				a.state = argsWhole
			}
		}
	}
}

func (s *StreamWriter) startBlock(kind openBlock, cb any) {
	s.ensureStart()
	s.event("content_block_start", blockStartEvent{Type: "content_block_start", Index: s.next, ContentBlock: cb})
	s.open = kind
	s.next++
}

// holdTool adds a held call's argument fragment, within the stream's hold
// bound: past it the stream fails as malformed, as interleaved calls did
// before they were held.
func (s *StreamWriter) holdTool(index int, h *heldTool, args string) error {
	if s.heldBytes()+len(args) > MaxHeldThinkingBytes {
		return fmt.Errorf("%w: tool call %d held past %d bytes", ErrMalformedUpstream, index, MaxHeldThinkingBytes)
	}
	h.args = append(h.args, args...)
	s.heldTools += len(args)
	s.outBytes += len(args)
	s.keepAlive(len(args))
	return nil
}

// writeHeldTools writes the calls held behind a closed tool block, each a
// whole block (start, one input_json_delta, stop), in index order.
func (s *StreamWriter) writeHeldTools() {
	pending := s.pendingTools
	s.pendingTools, s.heldTools = nil, 0
	for _, index := range slices.Sorted(maps.Keys(pending)) {
		h := pending[index]
		s.startBlock(openTool, toolUseOut{Type: "tool_use", ID: h.id, Name: h.name, Input: emptyObject})
		if len(h.args) > 0 {
			s.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.next - 1, Delta: inputJSONDelta{Type: "input_json_delta", PartialJSON: string(h.args)}})
		}
		s.event("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: s.next - 1})
		s.open = openNone
	}
}

// closeBlock closes the open block; a tool's block is followed by the
// thinking held while it was open (think), as a closed block of its own,
// then by the calls held behind it (writeHeldTools).
func (s *StreamWriter) closeBlock() {
	if s.open == openNone {
		return
	}
	if s.open == openThinking {
		s.event("content_block_delta", signatureDelta(s.next-1))
	}
	s.event("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: s.next - 1})
	wasTool := s.open == openTool
	s.open = openNone
	if wasTool && s.owed {
		held := s.held
		s.owed, s.held = false, nil
		s.startBlock(openThinking, thinkingOut{Type: "thinking"})
		if len(held) > 0 {
			s.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.next - 1, Delta: thinkingDelta{Type: "thinking_delta", Thinking: string(held)}})
		}
		s.closeBlock()
	}
	if wasTool && len(s.pendingTools) > 0 {
		s.writeHeldTools()
	}
}

// answeredBy takes the model an upstream chunk names (the provider's
// target, as the OpenAI surface answers) for message_start's model, in
// place of the requested name, while message_start is unwritten. Empty
// (an upstream that names none) keeps the requested name.
func (s *StreamWriter) answeredBy(model string) {
	if model != "" && !s.msgStarted {
		s.model = model
	}
}

func (s *StreamWriter) ensureStart() {
	if s.msgStarted {
		return
	}
	s.msgStarted = true
	s.event("message_start", startEvent{Type: "message_start", Message: msgResponse{
		ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []any{},
		Usage: usageOut{InputTokens: s.inputTokens},
	}})
}

// Finish ends a successful stream (the upstream's [DONE]): it closes the
// open block and writes message_delta and message_stop. Output tokens are
// the upstream's completion_tokens, or an estimate from the bytes streamed
// when it reported no usage. Does nothing once the stream has ended.
func (s *StreamWriter) Finish() error {
	if s.err != nil || s.closed {
		return s.err
	}
	s.ensureStart()
	s.closeBlock()
	reason, seq := stopReason(s.finish, s.vllmStop, len(s.toolsSeen) > 0, s.stopSequences)
	s.stopReason = reason
	ev := messageDeltaEvent{Type: "message_delta"}
	ev.Delta.StopReason = reason
	ev.Delta.StopSequence = seq
	if s.usage != nil {
		ev.Usage.OutputTokens = max(s.usage.CompletionTokens, 0)
		if s.usage.PromptTokens > 0 {
			in := s.usage.PromptTokens
			ev.Usage.InputTokens = &in
		}
	} else {
		ev.Usage.OutputTokens = estimateOutput(s.outBytes)
	}
	s.event("message_delta", ev)
	s.eventRaw("message_stop", eventMessageStop)
	s.closed = true
	return s.err
}

// Whole writes a whole non-stream chat.completion, from an upstream that
// ignored "stream": true, as the stream it would have been: one chunk
// carrying the message RenderMessage would render, then Finish. It returns an error
// wrapping ErrMalformedUpstream for a body that is not a completion with a
// choice (the caller should Fail with a 502 api_error).
func (s *StreamWriter) Whole(body []byte) error {
	if s.err != nil || s.closed {
		return s.err
	}
	var c oaWhole
	if err := json.Unmarshal(body, &c); err != nil {
		return fmt.Errorf("%w: completion: %w", ErrMalformedUpstream, err)
	}
	// An error document, read as a whole answer's is (UpstreamError); an
	// "error" member beside choices is a provider's extra, and the
	// completion is rendered, as RenderMessage renders it.
	if e, ok := UpstreamError(body); ok {
		return s.Fail(e)
	}
	if len(c.Choices) == 0 {
		return fmt.Errorf("%w: completion without a choice", ErrMalformedUpstream)
	}
	s.answeredBy(c.Model)
	// The choice RenderMessage renders: index 0, else the first.
	ch := c.Choices[0]
	for _, cand := range c.Choices {
		if cand.Index == 0 {
			ch = cand
			break
		}
	}
	ch.Delta, ch.Message = ch.Message, oaAnswer{}
	// A message's calls carry no index (a chunk's do): each is its own.
	for i := range ch.Delta.ToolCalls {
		ch.Delta.ToolCalls[i].Index = i
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	if err := s.choice(ch); err != nil {
		return err
	}
	return s.Finish()
}

// Fail ends the stream with `event: error` carrying e's envelope (nil: a
// generic 500 api_error) and writes nothing after it: no block stop, no
// message_stop, so clients see a failed stream, never a complete-looking
// one. Before Started the caller should prefer WriteError. Does nothing once
// the stream has ended.
func (s *StreamWriter) Fail(e *Error) error {
	if s.err != nil || s.closed {
		return s.err
	}
	if e == nil {
		e = NewError(http.StatusInternalServerError, "Internal error.")
	}
	s.failure = e
	s.eventRaw("error", e.Envelope(""))
	s.closed = true
	return s.err
}

// Ping writes `event: ping` (after message_start, which it writes first if
// needed, so it commits the response to a stream). Does nothing once the
// stream has ended.
func (s *StreamWriter) Ping() error {
	if s.err != nil || s.closed {
		return s.err
	}
	s.ensureStart()
	s.eventRaw("ping", eventPing)
	return s.err
}

// Started reports whether anything has been written. Until then the caller
// can still answer with an HTTP error (WriteError).
func (s *StreamWriter) Started() bool { return s.started }

// Done reports whether the stream has ended (message_stop or error).
func (s *StreamWriter) Done() bool { return s.closed }

// Failure is the error the stream ended with (Fail or an upstream error
// event), or nil.
func (s *StreamWriter) Failure() *Error { return s.failure }

// StopReason is the stop_reason sent, after a successful Finish.
func (s *StreamWriter) StopReason() string { return s.stopReason }

func (s *StreamWriter) event(name string, v any) { s.eventRaw(name, mustMarshal(v)) }

// eventRaw writes one event and flushes it. After a write error nothing
// more is written; the error is kept in s.err and returned by every call.
func (s *StreamWriter) eventRaw(name string, payload []byte) {
	if s.err != nil {
		return
	}
	s.started = true
	b := make([]byte, 0, len(name)+len(payload)+16)
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, payload...)
	b = append(b, "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		s.err = fmt.Errorf("anthropicapi: write stream: %w", err)
		return
	}
	if s.flush != nil {
		s.flush()
	}
}
