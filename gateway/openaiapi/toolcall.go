package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// ToolCall is an OpenAI tool call as it appears in message.tool_calls.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a tool call. Arguments is always a
// JSON document encoded as a string, as OpenAI sends it.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// The text tool-call block the adapter's fallback instruction asks for
// (CONTRACT §5 "Text tool calls").
const (
	toolOpenTag  = "<tool_call>"
	toolCloseTag = "</tool_call>"
)

var toolOpenTagBytes, toolCloseTagBytes = []byte(toolOpenTag), []byte(toolCloseTag)

// newToolCallID returns "call_" + 24 random alphanumerics.
func newToolCallID() string { return "call_" + randomAlnum(24) }

// ParseTextToolCalls restores text tool calls from assistant content.
//
// Scanning left to right, a block runs from "<tool_call>" to the first
// "</tool_call>" after it. A block whose body is a JSON object
// {"name": N, "arguments": A} with N among offered becomes a ToolCall (fresh
// id, type "function", A re-encoded as a compact JSON string; an A that is
// already a string is kept as is; a missing or null A is "{}"; "parameters"
// is accepted for A, as some models write it) and is cut from the content.
// Blocks naming other tools, with invalid JSON, or left unclosed stay in the
// content untouched. When at least one call was restored and what remains is
// only whitespace, rest is "" (the message's content becomes null).
//
// Call it only for runs marked openai_text_tool_fallback=true: ordinary
// answers may legitimately contain such text.
func ParseTextToolCalls(content string, offered []string) (rest string, calls []ToolCall) {
	return parseTextToolCalls(content, offered, false)
}

// parseTextToolCalls is ParseTextToolCalls; single (parallel_tool_calls
// false) restores only the first call and cuts the blocks of later valid
// calls from the content without restoring them: OpenAI never answers
// such a request with a second call, an agent loop runs the first and asks
// again (the model then makes its next call with the first one's result in
// view), and a <tool_call> block left in the content would be echoed back
// in the conversation as if it were said, or shown to a user as markup.
func parseTextToolCalls(content string, offered []string, single bool) (rest string, calls []ToolCall) {
	if len(offered) == 0 || !strings.Contains(content, toolOpenTag) {
		return content, nil
	}
	set := offeredSet(offered)
	var b strings.Builder
	i := 0
	for {
		j := strings.Index(content[i:], toolOpenTag)
		if j < 0 {
			b.WriteString(content[i:])
			break
		}
		start := i + j
		b.WriteString(content[i:start])
		bodyStart := start + len(toolOpenTag)
		k := strings.Index(content[bodyStart:], toolCloseTag)
		if k < 0 {
			b.WriteString(content[start:])
			break
		}
		end := bodyStart + k + len(toolCloseTag)
		if call, ok := parseToolBlock(content[bodyStart:bodyStart+k], set); ok {
			if !single || len(calls) == 0 {
				calls = append(calls, call)
			}
		} else {
			b.WriteString(content[start:end])
		}
		i = end
	}
	if len(calls) == 0 {
		return content, nil
	}
	rest = b.String()
	if strings.TrimSpace(rest) == "" {
		rest = ""
	}
	return rest, calls
}

func offeredSet(offered []string) map[string]bool {
	set := make(map[string]bool, len(offered))
	for _, n := range offered {
		set[n] = true
	}
	return set
}

// parseToolBlock parses the body between the tags.
func parseToolBlock(body string, offered map[string]bool) (ToolCall, bool) {
	var obj map[string]json.RawMessage
	trimmed := strings.TrimSpace(body)
	if !strings.HasPrefix(trimmed, "{") || json.Unmarshal([]byte(trimmed), &obj) != nil {
		return ToolCall{}, false
	}
	name, ok := asString(obj["name"])
	if !ok || !offered[name] {
		return ToolCall{}, false
	}
	rawArgs, has := obj["arguments"]
	if !has {
		rawArgs, has = obj["parameters"]
	}
	args, ok := argumentsString(rawArgs, has)
	if !ok {
		return ToolCall{}, false
	}
	return ToolCall{ID: newToolCallID(), Type: "function", Function: FunctionCall{Name: name, Arguments: args}}, true
}

// argumentsString turns a tool call's arguments value into OpenAI's
// string form: objects compacted (key order and values kept verbatim),
// strings kept, absent/null as "{}". Other JSON types are not arguments.
func argumentsString(raw json.RawMessage, present bool) (string, bool) {
	if !present || isNull(raw) {
		return "{}", true
	}
	if s, ok := asString(raw); ok {
		return s, true
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return "", false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, t) != nil {
		return "", false
	}
	return buf.String(), true
}

// errBadNativeToolCalls marks malformed openai_tool_calls metadata.
var errBadNativeToolCalls = errors.New("openaiapi: malformed openai_tool_calls metadata")

// parseNativeToolCalls decodes RunEvent.metadata["openai_tool_calls"]: the
// provider's own tool calls, restored as given. Defensive about the shape
// (the adapter promises string arguments and ids, but a gap here would
// break every SDK reading the response): a missing id is generated, a
// missing type is "function", object arguments are compacted to a string.
func parseNativeToolCalls(raw string) ([]ToolCall, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var items []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		return nil, errBadNativeToolCalls
	}
	calls := make([]ToolCall, 0, len(items))
	for _, it := range items {
		if it.Function.Name == "" {
			return nil, errBadNativeToolCalls
		}
		args, ok := argumentsString(it.Function.Arguments, it.Function.Arguments != nil)
		if !ok {
			return nil, errBadNativeToolCalls
		}
		c := ToolCall{ID: it.ID, Type: it.Type, Function: FunctionCall{Name: it.Function.Name, Arguments: args}}
		if c.ID == "" {
			c.ID = newToolCallID()
		}
		if c.Type == "" {
			c.Type = "function"
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// segment is a piece of streamed content classified by textToolScanner.
type segment struct {
	text      string    // the text as written (for a call: the whole block)
	call      *ToolCall // non-nil when the block is a valid call of an offered tool
	reasoning bool      // text is reasoning that came after the content before it
}

// reasoningMark is reasoning the model produced after the first at bytes
// of what a textToolScanner holds.
type reasoningMark struct {
	at   int
	text string
}

// textToolScanner is the incremental form of ParseTextToolCalls's scan: fed
// content in arbitrary pieces, it emits the same text/block segmentation,
// holding back only what might still become a block — a trailing partial
// "<tool_call>" prefix, or an opened block awaiting its close tag.
//
// What it holds grows by append, so a block streamed in many pieces (a
// tool argument carrying a whole file) costs its length, not its square.
type textToolScanner struct {
	offered  map[string]bool
	buf      []byte // held content; empty when nothing is held
	inBlock  bool   // buf starts with the open tag
	searched int    // in a block: bytes of buf already searched for the close tag
	// marks are reasoning pieces that came while buf was held, in order;
	// each goes out after the held text before it (emitText's split), or
	// after the block it came inside.
	marks []reasoningMark
}

// hold places reasoning r after everything held (buf is not empty).
func (s *textToolScanner) hold(r string) {
	s.marks = append(s.marks, reasoningMark{at: len(s.buf), text: r})
}

func (s *textToolScanner) feed(text string, emit func(segment)) {
	if !s.inBlock && len(s.buf) == 0 {
		// Nothing held (the common case): text is scanned where it is and
		// only what may start a block is copied.
		j := strings.Index(text, toolOpenTag)
		if j < 0 {
			keep := partialPrefixLen(text, toolOpenTag)
			emitText(text[:len(text)-keep], emit)
			s.buf = append(s.buf, text[len(text)-keep:]...)
			return
		}
		emitText(text[:j], emit)
		text = text[j:]
	}
	s.buf = append(s.buf, text...)
	// drop only reslices, and what is left moves back to the front once,
	// on return: a piece holding many blocks costs its length, not its
	// length times its blocks.
	defer s.compact(s.buf)
	for {
		if !s.inBlock {
			if j := bytes.Index(s.buf, toolOpenTagBytes); j >= 0 {
				s.emitHeld(j, emit)
				s.drop(j)
				s.inBlock, s.searched = true, len(toolOpenTag)
				continue
			}
			n := len(s.buf) - partialPrefixLen(s.buf, toolOpenTag)
			s.emitHeld(n, emit)
			s.drop(n)
			return
		}
		from := max(len(toolOpenTag), s.searched-len(toolCloseTag)+1)
		k := bytes.Index(s.buf[from:], toolCloseTagBytes)
		if k < 0 {
			s.searched = len(s.buf)
			return
		}
		end := from + k + len(toolCloseTag)
		block := string(s.buf[:end])
		if call, ok := parseToolBlock(block[len(toolOpenTag):from+k], s.offered); ok {
			emit(segment{text: block, call: &call})
		} else {
			emit(segment{text: block})
		}
		s.emitMarks(end, emit)
		s.drop(end)
		s.inBlock, s.searched = false, 0
	}
}

// emitHeld emits the first n held bytes as text, with the reasoning that
// came among them in its place.
func (s *textToolScanner) emitHeld(n int, emit func(segment)) {
	from := 0
	for len(s.marks) > 0 && s.marks[0].at <= n {
		emitText(string(s.buf[from:s.marks[0].at]), emit)
		from = s.marks[0].at
		s.emitMarks(from, emit)
	}
	emitText(string(s.buf[from:n]), emit)
}

// emitMarks emits the reasoning that came within the first n held bytes.
func (s *textToolScanner) emitMarks(n int, emit func(segment)) {
	i := 0
	for ; i < len(s.marks) && s.marks[i].at <= n; i++ {
		emit(segment{text: s.marks[i].text, reasoning: true})
	}
	if i > 0 {
		s.marks = s.marks[:copy(s.marks, s.marks[i:])]
	}
}

// drop discards the first n held bytes, within feed (see compact).
func (s *textToolScanner) drop(n int) {
	for i := range s.marks {
		s.marks[i].at -= n
	}
	s.buf = s.buf[n:]
}

// compact moves what is still held to the front of full, the buffer feed
// filled, once feed has dropped what it emitted. A buffer grown for a
// long block is let go once it is empty: a quiet stream holds none.
func (s *textToolScanner) compact(full []byte) {
	switch {
	case len(s.buf) == len(full):
	case len(s.buf) == 0 && cap(full) > maxIdleHold:
		s.buf = nil
	default:
		s.buf = full[:copy(full, s.buf)]
	}
}

// maxIdleHold is the largest held-text buffer kept for reuse while empty.
const maxIdleHold = 4 << 10

// finish emits whatever is held (a partial tag or an unclosed block) as text.
func (s *textToolScanner) finish(emit func(segment)) {
	s.emitHeld(len(s.buf), emit)
	s.buf, s.marks, s.inBlock, s.searched = nil, nil, false, 0
}

func emitText(t string, emit func(segment)) {
	if t != "" {
		emit(segment{text: t})
	}
}

// partialPrefixLen is the length of the longest suffix of s that is a proper
// prefix of tag, i.e. how much of s might be the start of a tag.
func partialPrefixLen[T string | []byte](s T, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if string(s[len(s)-k:]) == tag[:k] {
			return k
		}
	}
	return 0
}

// toolHolder decides, for a streamed chat that offered tools, which text is
// released at once and which is held, so that the streamed content and tool
// calls end up equal to what the non-stream rendering produces.
//
//   - Text that cannot be part of a block is released immediately, except
//     leading whitespace: if the answer turns out to be only tool calls its
//     content must be null, so whitespace is held until real text follows.
//   - A closed block that is a valid call is emitted as a tool call at once
//     when the run is already known to be a text-fallback run. If that mark
//     has not arrived yet (it may come only on the complete event), the call
//     and everything after it are held, so that an unmarked run still gets
//     its content back verbatim and in order.
//   - At the end (finish), a marked run turns held calls into tool calls and
//     drops whitespace-only content; an unmarked run releases everything.
//   - With single (parallel_tool_calls false), a marked run emits the first
//     call and drops later ones, as parseTextToolCalls does.
type toolHolder struct {
	scan         textToolScanner
	single       bool // restore only the first call; later calls are dropped (parseTextToolCalls)
	marked       bool
	releasedReal bool      // non-whitespace text has been released
	wsHold       []byte    // leading whitespace not yet released (appended: see textToolScanner)
	queue        []segment // held from the first unconfirmed call onwards
	queued       int       // bytes of text in queue
	heldThought  int       // bytes of reasoning held behind text (scan.marks and queue)
	// ahead is what is ready to send before outText and outCalls: text
	// and calls with the reasoning that followed them.
	ahead        []heldOut
	callsEmitted int
	outText      strings.Builder // text ready to send
	outCalls     []ToolCall      // calls ready to send
}

// heldOut is text and calls released from the hold, then the reasoning the
// model produced after them.
type heldOut struct {
	text      string
	calls     []ToolCall
	reasoning string
}

func newToolHolder(offered []string) *toolHolder {
	return &toolHolder{scan: textToolScanner{offered: offeredSet(offered)}}
}

// push takes the next delta. What is held is bounded by MaxAnswerBytes,
// as a non-streamed answer is: past it, everything held is released as
// text, verbatim and in order (a non-streamed answer that large fails as a
// whole, so there is no rendering to stay equal to), and holding starts
// afresh.
func (h *toolHolder) push(delta string) {
	h.scan.feed(delta, h.route)
	h.bound()
}

// holdsText reports whether text that may be (or is) a text tool call is
// held: reasoning coming now must wait behind it (pushReasoning). Held
// leading whitespace does not count: it is invisible, and holding
// reasoning behind it could hide a whole answer's thinking until its end.
func (h *toolHolder) holdsText() bool { return len(h.scan.buf) > 0 || len(h.queue) > 0 }

// pushReasoning takes reasoning the model produced after the text held
// (holdsText): it goes out after that text is released or decided, in the
// model's order, and counts toward push's bound.
func (h *toolHolder) pushReasoning(r string) {
	h.heldThought += len(r)
	if len(h.scan.buf) > 0 {
		h.scan.hold(r)
	} else {
		h.route(segment{text: r, reasoning: true})
	}
	h.bound()
}

// maxHeldPieces bounds the pieces held apart (reasoning within held
// text, segments queued behind a call), each of which costs some fifty
// bytes besides its text: a stream of one-byte deltas would otherwise
// hold some forty times MaxAnswerBytes. No model's answer comes in that
// many deltas (each a token or more), so only a broken or hostile node
// reaches it, and what is held is then released as at MaxAnswerBytes.
const maxHeldPieces = 1 << 18

// bound releases everything held once it is past MaxAnswerBytes (push),
// or holds more than maxHeldPieces pieces.
func (h *toolHolder) bound() {
	if len(h.scan.buf)+len(h.wsHold)+h.queued+h.heldThought > MaxAnswerBytes ||
		len(h.scan.marks)+len(h.queue) > maxHeldPieces {
		h.finish(false)
		h.releasedReal = true
	}
}

// think sends reasoning r after what is ready so far.
func (h *toolHolder) think(r string) {
	h.heldThought -= len(r)
	h.ahead = append(h.ahead, heldOut{text: h.outText.String(), calls: h.outCalls, reasoning: r})
	h.outText.Reset()
	h.outCalls = nil
}

// mark records that the run is a text-fallback run and releases what was
// held waiting for that answer.
func (h *toolHolder) mark() {
	if h.marked {
		return
	}
	h.marked = true
	q := h.queue
	h.queue, h.queued = nil, 0
	for _, s := range q {
		h.route(s)
	}
}

func (h *toolHolder) route(s segment) {
	if len(h.queue) > 0 {
		h.queue = append(h.queue, s)
		if !s.reasoning {
			h.queued += len(s.text)
		}
		return
	}
	if s.reasoning {
		h.think(s.text)
		return
	}
	if s.call != nil {
		if h.marked {
			if !h.single || h.callsEmitted == 0 {
				h.outCalls = append(h.outCalls, *s.call)
			}
			h.callsEmitted++
			return
		}
		h.queue = append(h.queue, s)
		h.queued += len(s.text)
		return
	}
	h.release(s.text)
}

func (h *toolHolder) release(t string) {
	switch {
	case t == "":
	case h.releasedReal:
		h.outText.WriteString(t)
	case strings.TrimSpace(t) == "":
		h.wsHold = append(h.wsHold, t...)
	default:
		h.outText.Write(h.wsHold)
		h.outText.WriteString(t)
		h.wsHold = nil
		h.releasedReal = true
	}
}

// finish flushes everything held. restore says whether text tool calls are
// to be restored (a marked run without native tool calls).
func (h *toolHolder) finish(restore bool) {
	if restore {
		h.mark()
		h.scan.finish(h.route)
		if h.callsEmitted == 0 {
			h.outText.Write(h.wsHold)
		}
		h.wsHold = nil
		return
	}
	// Not restoring: everything held is content, verbatim and in order.
	h.outText.Write(h.wsHold)
	h.wsHold = nil
	verbatim := func(s segment) {
		if s.reasoning {
			h.think(s.text)
		} else {
			h.outText.WriteString(s.text)
		}
	}
	for _, s := range h.queue {
		verbatim(s)
	}
	h.queue, h.queued = nil, 0
	h.scan.finish(verbatim)
}

// dropBlank discards the leading whitespace held when it is all the
// content so far and nothing else is held: called before finish for an
// answer with native tool calls, whose content the non-stream rendering
// makes null when it is only whitespace. (The scanner holds only text that
// starts a tag, and the queue only blocks: neither is whitespace.)
func (h *toolHolder) dropBlank() {
	if !h.releasedReal && len(h.queue) == 0 && len(h.scan.buf) == 0 {
		h.wsHold = nil
	}
}

// take returns and clears what is ready to send.
func (h *toolHolder) take() (string, []ToolCall) {
	t := h.outText.String()
	h.outText.Reset()
	c := h.outCalls
	h.outCalls = nil
	return t, c
}
