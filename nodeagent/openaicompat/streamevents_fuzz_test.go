package openaicompat

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// FuzzStreamEvents feeds any sequence of event data (separated by blank
// lines) to a run's stream state: it never panics, and a successful
// result's tool calls are a JSON array of calls with names and unique ids,
// and with arguments that are valid UTF-8; reasoning comes only from events
// that name a reasoning member.
func FuzzStreamEvents(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c","index":0,"function":{"name":"f","arguments":"{"}}]}}]}` + "\n\n" +
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n[DONE]"))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":null,"tool_calls":[{"function":{"name":"a","arguments":{"x":1}}},{"id":"0","function":{"name":"b"}}]},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"error":{"message":"m","code":400}}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}` + "\n\n" +
		`{"choices":[{"index":0,"delta":{"reasoning_content":"s","reasoning":"s","content":"a"},"finish_reason":"stop"}]}` + "\n\n[DONE]"))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"reasoning":"r","content":"a"},"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"index":1,"delta":{"reasoning":{"x":1}}},{"index":0,"delta":{"reasoning":"\u00e9"}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		sink := &reasonSink{}
		st := &streamState{sink: sink}
		for ev := range bytes.SplitSeq(in, []byte("\n\n")) {
			before := len(sink.got())
			err := st.event(ev)
			if !bytes.Contains(ev, reasoningKey) {
				for _, e := range sink.got()[before:] {
					if e[0] == 'r' {
						t.Fatalf("reasoning %q from an event without a reasoning member: %q", e, ev)
					}
				}
			}
			if err != nil {
				return
			}
		}
		res, err := st.result()
		if err != nil {
			return
		}
		raw, ok := res.Metadata[adapter.MetaToolCalls]
		if !ok {
			return
		}
		var calls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal([]byte(raw), &calls); err != nil || len(calls) == 0 {
			t.Fatalf("tool calls %q: %v", raw, err)
		}
		seen := map[string]bool{}
		for _, c := range calls {
			if c.ID == "" || seen[c.ID] || c.Type != "function" || c.Function.Name == "" || !utf8.ValidString(c.Function.Arguments) {
				t.Fatalf("call %+v in %s", c, raw)
			}
			seen[c.ID] = true
		}
		// A plain stop (or none) with calls is "tool_calls"; any other
		// reason ("length", a vendor's) stands (streamState.result).
		if res.FinishReason == "" || res.FinishReason == "stop" {
			t.Fatalf("finish %q with tool calls", res.FinishReason)
		}
	})
}
