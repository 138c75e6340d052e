package openaiapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// runEvents splits b into RunEvents: each a length byte, then that many
// bytes of a protobuf RunEvent; what does not decode is skipped.
func runEvents(b []byte) []*iop.RunEvent {
	var evs []*iop.RunEvent
	for len(b) > 0 {
		n := int(b[0])
		b = b[1:]
		n = min(n, len(b))
		ev := &iop.RunEvent{}
		if proto.Unmarshal(b[:n], ev) == nil {
			evs = append(evs, ev)
		}
		b = b[n:]
	}
	return evs
}

// reasoningKey can only be a member name: JSON strings escape their quotes.
var reasoningKey = []byte(`"reasoning":`)

func encodeEvents(f *testing.F, evs ...*iop.RunEvent) []byte {
	var out []byte
	for _, ev := range evs {
		b, err := proto.Marshal(ev)
		if err != nil || len(b) > 255 {
			f.Fatalf("seed event: %v (%d bytes)", err, len(b))
		}
		out = append(append(out, byte(len(b))), b...)
	}
	return out
}

// RunEvents come from a node, which may be broken or hostile: whatever
// their order and content, every renderer answers with valid JSON (a whole
// document, or SSE events whose data is JSON or [DONE]) or an error, and
// never panics. Reasoning never reaches a legacy completion.
func FuzzRunEvents(f *testing.F) {
	delta := func(s string) *iop.RunEvent {
		return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: s}
	}
	start := &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START}
	complete := &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop", Usage: &iop.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}}
	f.Add(encodeEvents(f, start, delta("Hel"), delta("lo"), complete))
	f.Add(encodeEvents(f, start, delta(`<tool_call>{"name":"get_weather","arguments":{"city":"Seoul"}}`), delta(`</tool_call>`), complete))
	f.Add(encodeEvents(f, start, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 503}}))
	f.Add(encodeEvents(f, start, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, Output: []byte(`{"embeddings":[[0.1,0.2]]}`)}))
	f.Add(encodeEvents(f, delta("x"), complete, delta("after")))
	reasoning := func(r, d string) *iop.RunEvent {
		return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: r, Delta: d}
	}
	f.Add(encodeEvents(f, start, reasoning("Let me", ""), reasoning(" think", "Hi"), delta(`<tool_call>{"name":"get_weather","arguments":{}}</tool_call>`), complete))
	f.Add(encodeEvents(f, reasoning("\x00\"", ""), &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "length"}))
	opts := RenderOptions{Model: "m", ID: "chatcmpl-1", Created: 1, IncludeUsage: true, ToolNames: []string{"get_weather"}, PromptTokens: 3}
	f.Fuzz(func(t *testing.T, b []byte) {
		evs := runEvents(b)
		for name, agg := range map[string]interface {
			Add(*iop.RunEvent) bool
			Result() ([]byte, *Error)
		}{
			"chat":       NewChatAggregator(opts),
			"completion": NewCompletionAggregator(opts),
			"embedding":  NewEmbeddingAggregator(EmbeddingOptions{Model: "m", PromptTokens: 3}),
		} {
			for _, ev := range evs {
				if agg.Add(ev) {
					break
				}
			}
			out, err := agg.Result()
			if err == nil && !json.Valid(out) {
				t.Fatalf("%s aggregator: invalid JSON %q", name, out)
			}
			if name != "chat" && bytes.Contains(out, reasoningKey) {
				t.Fatalf("%s aggregator: reasoning in %q", name, out)
			}
		}
		for name, mk := range map[string]func(*bytes.Buffer) interface{ Add(*iop.RunEvent) error }{
			"chat stream": func(w *bytes.Buffer) interface{ Add(*iop.RunEvent) error } { return NewChatStreamWriter(w, nil, opts) },
			"completion stream": func(w *bytes.Buffer) interface{ Add(*iop.RunEvent) error } {
				return NewCompletionStreamWriter(w, nil, opts)
			},
		} {
			var w bytes.Buffer
			sw := mk(&w)
			for _, ev := range evs {
				if sw.Add(ev) != nil {
					break
				}
			}
			if name != "chat stream" && bytes.Contains(w.Bytes(), reasoningKey) {
				t.Fatalf("%s: reasoning in %q", name, w.Bytes())
			}
			sc := bufio.NewScanner(&w)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
				if ok && string(data) != "[DONE]" && !json.Valid(data) {
					t.Fatalf("%s: event data is not JSON: %q", name, data)
				}
			}
		}
	})
}
