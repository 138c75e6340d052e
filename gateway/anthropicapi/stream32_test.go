package anthropicapi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// midToolChunks is a stream whose reasoning comes between the fragments
// of a tool call, then after the call (before the next), then after the
// last call before the end.
var midToolChunks = []string{
	`{"choices":[{"index":0,"delta":{"reasoning":"Weather first."}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"Paris, "}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"in C."}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"name":"get_time","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"Both asked."}}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`[DONE]`,
}

// Reasoning between a tool call's fragments is held until the call's block
// closes, then shown as a thinking block of its own: the call's later
// fragments keep their block (closing it for the reasoning failed the
// stream as malformed), and no reasoning is lost or reordered among
// thinking blocks. Without thinking it is dropped as before.
func TestStreamReasoningMidToolCall(t *testing.T) {
	got := streamSummary(t, true, midToolChunks...)
	want := []string{
		"start:thinking@0", "thinking_delta:Weather first.@0", "signature_delta:@0", "stop@0",
		"start:tool_use@1", `input_json_delta:{"city":@1`, `input_json_delta:"Paris"}@1`, "stop@1",
		"start:thinking@2", "thinking_delta:Paris, in C.@2", "signature_delta:@2", "stop@2",
		"start:tool_use@3", "input_json_delta:{}@3", "stop@3",
		"start:thinking@4", "thinking_delta:Both asked.@4", "signature_delta:@4", "stop@4",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
	got = streamSummary(t, false, midToolChunks...)
	want = []string{"start:tool_use@0", `input_json_delta:{"city":@0`, `input_json_delta:"Paris"}@0`, "stop@0",
		"start:tool_use@1", "input_json_delta:{}@1", "stop@1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("without thinking\n got %q\nwant %q", got, want)
	}
}

// With display "omitted" the held reasoning owes an empty thinking block
// after the call, as shown reasoning would have its block there.
func TestStreamReasoningMidToolCallOmitted(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, true)
	s.OmitThinking()
	feed(t, s, midToolChunks...)
	checkEvents(t, buf.Bytes())
	if strings.Contains(buf.String(), "thinking_delta") || strings.Contains(buf.String(), "Paris, ") {
		t.Errorf("omitted thinking shown: %s", buf.String())
	}
	var order []string
	for _, line := range strings.Split(buf.String(), "\n") {
		for _, typ := range []string{`"type":"thinking"`, `"type":"tool_use"`} {
			if strings.Contains(line, "content_block_start") && strings.Contains(line, typ) {
				order = append(order, typ)
			}
		}
	}
	if strings.Join(order, ",") != `"type":"thinking","type":"tool_use","type":"thinking","type":"tool_use","type":"thinking"` {
		t.Errorf("blocks %v", order)
	}
}

// The held reasoning is bounded: past MaxHeldThinkingBytes the call's
// block closes and the reasoning shows; a later fragment of that call is
// then malformed, as before reasoning was held.
func TestStreamReasoningMidToolCallBounded(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, true)
	big := strings.Repeat("x", MaxHeldThinkingBytes/2)
	feed(t, s,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"`+big+`"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"`+big+`"}}]}`)
	if len(s.held) != MaxHeldThinkingBytes || s.open != openTool {
		t.Fatalf("held %d bytes, open block %d; want the bound held and the call open", len(s.held), s.open)
	}
	feed(t, s, `{"choices":[{"index":0,"delta":{"reasoning":"y"}}]}`)
	if s.held != nil || s.open != openThinking {
		t.Fatalf("past the bound: held %d bytes, open block %d", len(s.held), s.open)
	}
	err := s.Chunk([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`))
	if !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("a fragment after its block closed: %v, want malformed", err)
	}
}
