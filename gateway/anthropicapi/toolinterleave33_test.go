package anthropicapi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// toolFragment is a chunk carrying one tool call fragment; name "" leaves
// the name (and id) out, as later fragments do.
func toolFragment(index, name, args string) string {
	head := `"index":` + index
	if name != "" {
		head += `,"id":"call_` + index + `","type":"function","function":{"name":"` + name + `","arguments":` + args + `}`
	} else {
		head += `,"function":{"arguments":` + args + `}`
	}
	return `{"choices":[{"index":0,"delta":{"tool_calls":[{` + head + `}]}}]}`
}

// Fragments of parallel calls interleaved across indexes (as OpenAI
// streams may send them) give each call its block: the first call's block
// streams as it comes, the calls that started while it was open are held
// and written whole once it closes, in index order (2 started before 1
// here), with their ids and names; then text after the calls opens its own
// block. Before, the first call's fragment after another call started
// ended the stream as malformed (502 error event).
func TestStreamInterleavedToolCalls(t *testing.T) {
	chunks := []string{
		toolFragment("0", "f", `"{\"a\":"`),
		toolFragment("2", "h", `"{\"c\":"`),
		toolFragment("1", "g", `"{\"b\":"`),
		toolFragment("0", "", `"1}"`),
		toolFragment("2", "", `"3}"`),
		toolFragment("1", "", `"2}"`),
		`{"choices":[{"index":0,"delta":{"content":"done"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	}
	got := streamSummary(t, false, chunks...)
	want := []string{
		"start:tool_use@0", `input_json_delta:{"a":@0`, `input_json_delta:1}@0`, "stop@0",
		"start:tool_use@1", `input_json_delta:{"b":2}@1`, "stop@1",
		"start:tool_use@2", `input_json_delta:{"c":3}@2`, "stop@2",
		"start:text@3", "text_delta:done@3", "stop@3",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, false)
	feed(t, s, chunks...)
	out := buf.String()
	if !strings.Contains(out, `"id":"call_1","name":"g"`) || !strings.Contains(out, `"id":"call_2","name":"h"`) || s.StopReason() != StopToolUse {
		t.Errorf("stop reason %s, stream:\n%s", s.StopReason(), out)
	}
}

// Held calls count against the stream's hold bound with held reasoning:
// past MaxHeldThinkingBytes the stream is malformed (the caller's 502
// error event), and a held call without a name is malformed as an open
// one is.
func TestStreamInterleavedToolCallsBounded(t *testing.T) {
	s, _, _ := newTestStream(nil)
	feed(t, s, toolFragment("0", "f", `"{"`), toolFragment("1", "g", `"{"`))
	piece := `"` + strings.Repeat("x", 64<<10) + `"`
	var err error
	for i := 0; i < 17 && err == nil; i++ {
		err = s.Chunk([]byte(toolFragment("1", "", piece)))
	}
	if !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("past the bound: %v", err)
	}
	s, _, _ = newTestStream(nil)
	feed(t, s, toolFragment("0", "f", `"{"`))
	if err := s.Chunk([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{"}}]}}]}`)); !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("held call without a name: %v", err)
	}
}

// Held calls keep the stream alive as held reasoning does: a ping per
// HiddenThinkingPingBytes held.
func TestStreamHeldToolCallsPing(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, false)
	feed(t, s, toolFragment("0", "f", `"{"`), toolFragment("1", "g", `"{"`))
	piece := `"` + strings.Repeat("x", HiddenThinkingPingBytes/4) + `"`
	for range 12 {
		feed(t, s, toolFragment("1", "", piece))
	}
	if pings := strings.Count(buf.String(), "event: ping\n"); pings != 3 {
		t.Errorf("%d pings while %d bytes were held, want 3", pings, 12*HiddenThinkingPingBytes/4)
	}
}
