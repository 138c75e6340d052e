package openaicompat

import (
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// feedEvents runs SSE data payloads through a streamState and returns the
// result.
func feedEvents(t *testing.T, events ...string) (*streamState, *adapter.Result) {
	t.Helper()
	st := &streamState{sink: &fakeRunSink{}}
	for _, ev := range events {
		if err := st.event([]byte(ev)); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
	}
	res, err := st.result()
	if err != nil {
		t.Fatal(err)
	}
	return st, res
}

// TestToolCallDeltaShapes: the shapes of streamed tool calls that
// OpenAI-compatible servers other than vLLM send, each restored as the
// call the model made.
func TestToolCallDeltaShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		events []string
		want   string
	}{
		// The name streamed in pieces, as the arguments are.
		"name in pieces": {[]string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","index":0,"function":{"name":"get_","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		}, `[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`},
		// Arguments as an object rather than a string (compacted).
		"object arguments": {[]string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","index":0,"function":{"name":"f","arguments":{"x": 1}}}]},"finish_reason":"tool_calls"}]}`,
		}, `[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]`},
		// No arguments at all: "{}", which every SDK parses.
		"no arguments": {[]string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","index":0,"function":{"name":"f"}}]},"finish_reason":"tool_calls"}]}`,
		}, `[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]`},
		// No index, a new id per call: two calls, not one glued.
		"ids without index": {[]string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"y\":2}"}}]},"finish_reason":"tool_calls"}]}`,
		}, `[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"y\":2}"}}]`},
		// A call that never got a name cannot be rendered (an SDK needs
		// one to dispatch it): it is left out, the named one kept.
		"nameless call": {[]string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","index":0,"function":{"name":"f","arguments":"{}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		}, `[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]`},
	} {
		t.Run(name, func(t *testing.T) {
			_, res := feedEvents(t, tc.events...)
			jsonEqual(t, res.Metadata[adapter.MetaToolCalls], tc.want)
		})
	}
}

// TestBlankFinishReasonIsNotTheEnd: servers that send "finish_reason":""
// on every chunk (rather than null) have not finished: taken as the end,
// the stream would be cut afterFinishWait later.
func TestBlankFinishReasonIsNotTheEnd(t *testing.T) {
	st := &streamState{sink: &fakeRunSink{}}
	if err := st.event([]byte(`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":""}]}`)); err != nil {
		t.Fatal(err)
	}
	if st.terminal {
		t.Fatal(`finish_reason "" ended the stream`)
	}
}

// TestLaterNullUsageKeepsReportedUsage: a chunk after the usage chunk
// that carries "usage":null does not erase the usage reported.
func TestLaterNullUsageKeepsReportedUsage(t *testing.T) {
	_, res := feedEvents(t,
		`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
	)
	if res.Usage.GetTotalTokens() != 5 || res.Usage.GetPromptTokens() != 4 {
		t.Fatalf("usage %v", res.Usage)
	}
}

// TestContentAndToolCallInOneChunk: a chunk that carries both text and a
// tool call (some servers flush them together) passes on both.
func TestContentAndToolCallInOneChunk(t *testing.T) {
	st, res := feedEvents(t,
		`{"choices":[{"index":0,"delta":{"content":"Let me check.","tool_calls":[{"id":"call_a","type":"function","index":0,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	if got := st.sink.(*fakeRunSink).text(); got != "Let me check." {
		t.Fatalf("text %q", got)
	}
	jsonEqual(t, res.Metadata[adapter.MetaToolCalls], `[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]`)
}
