package openaicompat

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// errStreamDone stops reading once the upstream sent "data: [DONE]", so a
// server that keeps the connection open cannot hold the run.
var errStreamDone = errors.New("openaicompat: stream done")

// afterFinishWait bounds the wait for the end of a stream whose answer is
// complete (a finish_reason arrived). A var for tests.
var afterFinishWait = time.Second

// streamState accumulates one streamed chat or completion answer.
type streamState struct {
	sink   adapter.RunSink
	finish string
	usage  *usageJSON
	calls  []*toolCall // in order of first appearance
	// callBytes is the names and arguments collected in calls, bounded by
	// adapter.MaxToolCallBytes (and len(calls) by adapter.MaxToolCalls).
	callBytes int
	// terminal is set once the answer is known to be complete: "[DONE]", a
	// chunk with a finish_reason, or a whole non-streamed document.
	terminal bool
	// answered is set once a choice of index 0 arrived; an answer without
	// one is not an answer, however it ended.
	answered bool
}

// Messages of the failures a 2xx answer can still be. They reach the API
// caller, so they describe the fault without quoting the upstream's bytes.
const (
	msgUnreadableBody   = "The provider's response could not be read."
	msgUnreadableChunk  = "The provider's stream carried an unreadable chunk."
	msgStreamIncomplete = "The provider's stream ended before the answer was complete."
	msgNoChoices        = "The provider's response contained no answer."
)

// Sentinels behind those failures, for errors.Is in logs and tests.
var (
	errUnreadableBody   = errors.New("openaicompat: unreadable response body")
	errUnreadableChunk  = errors.New("openaicompat: unreadable stream chunk")
	errStreamIncomplete = errors.New("openaicompat: stream ended without its terminal event")
	errNoChoices        = errors.New("openaicompat: response without choices")
)

// badAnswer is the failure of a 2xx answer that is not a usable one: the
// run must not turn it into an empty success.
func badAnswer(msg string, err error) *adapter.Error {
	return &adapter.Error{Code: adapter.CodeUpstream, Message: msg, Err: err}
}

type toolCall struct {
	index int
	id    string
	typ   string
	name  string
	args  []byte
}

// chunkOf is the union of the shapes a chat/completion stream carries:
// data chunks, a usage chunk (choices empty) and error events (vLLM writes
// {"error":{…}} or, before 0.10, {"object":"error","message":…}). It also
// reads a whole non-streamed answer (choices[].message). P is what a delta
// or message holds: answerPart, or reasoningAnswer for a chunk that carries
// reasoning.
type chunkOf[P answerPart | reasoningAnswer] struct {
	Object  string          `json:"object"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Index        int     `json:"index"`
		Text         *string `json:"text"`
		Delta        *P      `json:"delta"`
		Message      *P      `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
}

// answerPart is a delta's or a whole message's answer.
type answerPart struct {
	Content   *string         `json:"content"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

// A reasoning model's thinking travels beside the answer in a delta or a
// whole message: as reasoning_content (vLLM's reasoning parsers, DeepSeek,
// llama.cpp with --reasoning-format deepseek) and/or reasoning (newer vLLM,
// OpenRouter, Ollama's /v1). A chunk whose bytes name neither is decoded
// without those members (chunkOf[answerPart]), so that an answer without
// reasoning costs what it did before they were read: a larger delta would
// take a larger allocation on every chunk.

// reasoningKey begins both members' keys.
var reasoningKey = []byte(`"reasoning`)

// reasoningAnswer is an answerPart with the reasoning beside it.
type reasoningAnswer struct {
	answerPart
	ReasoningContent reasoningText `json:"reasoning_content"`
	Reasoning        reasoningText `json:"reasoning"`
}

// reasoningText is a reasoning member's text. Only a string is text: null,
// or another vendor's shape under the same name, is no reasoning rather
// than an unreadable answer.
type reasoningText string

func (t *reasoningText) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = reasoningText(s)
	return nil
}

// parts returns the answer of a decoded delta or message p (nil when the
// chunk had none) and its reasoning members' text.
func parts[P answerPart | reasoningAnswer](p *P) (ap *answerPart, rc, r string) {
	switch v := any(p).(type) {
	case *answerPart:
		return v, "", ""
	case *reasoningAnswer:
		if v == nil {
			return nil, "", ""
		}
		return &v.answerPart, string(v.ReasoningContent), string(v.Reasoning)
	}
	return nil, "", ""
}

// sendReasoning sends a part's reasoning to sink: each member's text, and
// that text once when a backend fills both members with the same piece
// (vLLM did while it renamed reasoning_content to reasoning).
func sendReasoning(sink adapter.RunSink, rc, r string) error {
	if rc != "" {
		if err := adapter.Reasoning(sink, rc); err != nil {
			return err
		}
	}
	if r != "" && r != rc {
		return adapter.Reasoning(sink, r)
	}
	return nil
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// consume reads a 2xx answer: SSE normally, or one JSON document from a
// server that ignored "stream": true.
func (st *streamState) consume(resp *http.Response) error {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType == "application/json" {
		data, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxWholeResponse)+1))
		if err != nil {
			return err
		}
		if len(data) > maxWholeResponse {
			return adapter.AnswerTooLarge()
		}
		if !json.Valid(data) {
			return badAnswer(msgUnreadableBody, errUnreadableBody)
		}
		if err := st.apply(data); err != nil {
			return err
		}
		st.terminal = true // a whole document is complete by itself
		return nil
	}
	// After a finish_reason only the usage chunk and "[DONE]" are due, at
	// once; a server that leaves the stream open after the answer gets
	// afterFinishWait, then loses the connection, and the answer stands.
	var cut *time.Timer
	var cutFired atomic.Bool
	err := readEvents(resp.Body, func(data []byte) error {
		err := st.event(data)
		if err == nil && st.terminal && cut == nil {
			// Owner: consume; stopped below, fires at most once.
			cut = time.AfterFunc(afterFinishWait, func() { cutFired.Store(true); _ = resp.Body.Close() })
		}
		return err
	})
	if cut != nil {
		cut.Stop()
	}
	if errors.Is(err, errStreamDone) || (err != nil && cutFired.Load() && st.terminal) {
		return nil
	}
	if err == nil && !st.terminal {
		// EOF without "[DONE]" or a finish_reason: the server died or a
		// proxy cut the stream (or it was never SSE, e.g. an HTML page).
		return badAnswer(msgStreamIncomplete, errStreamIncomplete)
	}
	return err
}

// event handles one SSE event's data.
func (st *streamState) event(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		st.terminal = true
		return errStreamDone
	}
	if len(data) == 0 || data[0] != '{' {
		return nil
	}
	if !json.Valid(data) {
		// A chunk that does not parse lost part of the answer (text or a
		// tool call); passing the rest off as the whole would be a lie.
		return badAnswer(msgUnreadableChunk, errUnreadableChunk)
	}
	return st.apply(data)
}

// apply handles one chunk or whole document, already known to be valid JSON.
func (st *streamState) apply(data []byte) error {
	if bytes.Contains(data, reasoningKey) {
		return applyChunk[reasoningAnswer](st, data)
	}
	return applyChunk[answerPart](st, data)
}

// applyChunk decodes data as a chunkOf[P] and applies it.
func applyChunk[P answerPart | reasoningAnswer](st *streamState, data []byte) error {
	var ch chunkOf[P]
	if err := json.Unmarshal(data, &ch); err != nil {
		// Valid JSON of the wrong shape (e.g. "choices" not an array).
		return badAnswer(msgUnreadableBody, fmt.Errorf("%w: %w", errUnreadableBody, err))
	}
	if ch.Object == "error" || (len(ch.Error) > 0 && string(ch.Error) != "null") {
		return errorEvent(data)
	}
	if ch.Usage != nil {
		st.usage = ch.Usage
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // a run carries one choice
		}
		st.answered = true
		var text *string
		var calls []toolCallDelta
		whole := false
		switch {
		case c.Delta != nil:
			part, rc, r := parts(c.Delta)
			// Reasoning comes before the answer it leads to, within a
			// chunk too: vLLM's parsers end the reasoning and start the
			// content in one delta at the switch.
			if err := sendReasoning(st.sink, rc, r); err != nil {
				return &sinkErr{err}
			}
			text, calls = part.Content, part.ToolCalls
		case c.Message != nil:
			part, rc, r := parts(c.Message)
			if err := sendReasoning(st.sink, rc, r); err != nil {
				return &sinkErr{err}
			}
			text, calls, whole = part.Content, part.ToolCalls, true
		default:
			text = c.Text
		}
		if text != nil && *text != "" {
			if err := st.sink.Delta(*text); err != nil {
				return &sinkErr{err}
			}
		}
		for _, d := range calls {
			if err := st.addToolCall(d, whole); err != nil {
				return err
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			st.finish = *c.FinishReason
			st.terminal = true
		}
	}
	return nil
}

// addToolCall merges one tool-call delta: the first delta of a call brings
// id, type and name, later ones append argument text. whole marks an
// element of a whole message's tool_calls, which is a complete call of its
// own: that shape has no index, and ids may be missing or repeated, so
// matching it to an earlier call would glue two calls into one. It fails
// once the calls outgrow adapter.MaxToolCalls or adapter.MaxToolCallBytes.
func (st *streamState) addToolCall(d toolCallDelta, whole bool) error {
	var tc *toolCall
	n := len(st.calls)
	switch {
	case whole:
		// A new call, in the order of the list.
	case d.Index != nil:
		// Deltas mostly continue the latest call: look there first.
		for i := n - 1; i >= 0; i-- {
			if st.calls[i].index == *d.Index {
				tc = st.calls[i]
				break
			}
		}
	case n > 0 && (d.ID == "" || d.ID == st.calls[n-1].id):
		// Servers that omit index send one call at a time.
		tc = st.calls[n-1]
	}
	if tc == nil {
		if len(st.calls) == adapter.MaxToolCalls {
			return adapter.ToolCallsTooLarge()
		}
		idx := len(st.calls)
		if d.Index != nil && !whole {
			idx = *d.Index
		}
		tc = &toolCall{index: idx}
		st.calls = append(st.calls, tc)
	}
	before := len(tc.name) + len(tc.args)
	if d.ID != "" {
		tc.id = d.ID
	}
	if d.Type != "" {
		tc.typ = d.Type
	}
	switch name := d.Function.Name; {
	case name == "", name == tc.name:
		// Some servers repeat the full name on every delta.
	case tc.name == "":
		tc.name = name
	default:
		tc.name += name
	}
	if s := jsonString(d.Function.Arguments); s != "" {
		tc.args = append(tc.args, s...)
	} else if a := d.Function.Arguments; len(a) > 0 && a[0] == '{' {
		// Non-standard servers send arguments as an object.
		tc.args = append(tc.args, compactJSON(a)...)
	}
	if st.callBytes += len(tc.name) + len(tc.args) - before; st.callBytes > adapter.MaxToolCallBytes {
		return adapter.ToolCallsTooLarge()
	}
	return nil
}

// result builds the run result once the stream ended.
func (st *streamState) result() (*adapter.Result, error) {
	if !st.answered {
		return nil, badAnswer(msgNoChoices, errNoChoices)
	}
	res := &adapter.Result{FinishReason: st.finish, Usage: st.usage.proto()}
	if len(st.calls) == 0 {
		return res, nil
	}
	type function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string   `json:"id"`
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	slices.SortStableFunc(st.calls, func(a, b *toolCall) int { return cmp.Compare(a.index, b.index) })
	out := make([]call, 0, len(st.calls))
	// A client answers each call by its id: one id given to two calls gets
	// a fresh id for the later one, as a missing id does.
	seen := make(map[string]bool, len(st.calls))
	for _, tc := range st.calls {
		if tc.name == "" {
			continue
		}
		args := string(tc.args)
		if args == "" {
			args = "{}"
		}
		id := tc.id
		if id == "" || seen[id] {
			id = newCallID()
		}
		seen[id] = true
		out = append(out, call{ID: id, Type: "function", Function: function{Name: tc.name, Arguments: args}})
	}
	if len(out) == 0 {
		return res, nil
	}
	res.Metadata = map[string]string{adapter.MetaToolCalls: string(mustJSON(out))}
	// A plain stop (or none) with calls is OpenAI's "tool_calls". Any other
	// reason stands: "length" with calls is an answer cut short while it
	// wrote one, and reported as "tool_calls" an agent loop would run a
	// call whose arguments were cut (the edge maps vendor names).
	if res.FinishReason == "" || res.FinishReason == "stop" {
		res.FinishReason = "tool_calls"
	}
	return res, nil
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// isAdapterErr reports an error already classified for the Edge.
func isAdapterErr(err error) bool {
	var ae *adapter.Error
	return errors.As(err, &ae)
}

// embeddingOutput turns an embeddings response into the run Output (a JSON
// array of float arrays ordered by index) and its usage.
func embeddingOutput(data []byte) ([]byte, *usageJSON, error) {
	var doc struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage *usageJSON `json:"usage"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("openaicompat: decode embeddings: %w", err)
	}
	if len(doc.Data) == 0 {
		// Every embeddings request has at least one input.
		return nil, nil, errNoChoices
	}
	slices.SortStableFunc(doc.Data, func(a, b struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}) int {
		return cmp.Compare(a.Index, b.Index)
	})
	var out bytes.Buffer
	out.WriteByte('[')
	for i, d := range doc.Data {
		if i > 0 {
			out.WriteByte(',')
		}
		vec, err := embeddingVector(d.Embedding)
		if err != nil {
			return nil, nil, fmt.Errorf("openaicompat: embedding %d: %w", d.Index, err)
		}
		out.Write(vec)
	}
	out.WriteByte(']')
	return out.Bytes(), doc.Usage, nil
}

// embeddingVector returns one embedding as a compact JSON float array. A
// base64 string (little-endian float32, OpenAI's encoding) is decoded.
func embeddingVector(raw json.RawMessage) ([]byte, error) {
	if s := jsonString(raw); s != "" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errors.New("bad base64 embedding")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:]))
		}
		return json.Marshal(v)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '[' {
		return nil, errors.New("embedding is not an array")
	}
	return buf.Bytes(), nil
}
