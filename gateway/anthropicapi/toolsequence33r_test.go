package anthropicapi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Calls sent one after the other (vLLM and OpenAI send index 0 whole, then
// index 1) stream live: the second call's block starts, and its fragments
// go out, as they come, not held until the stream ends.
func TestStreamSequentialToolCallsStreamLive(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, false)
	feed(t, s,
		toolFragment("0", "f", `"{\"a\":"`),
		toolFragment("0", "", `"\"}\"} "`), // a brace inside a string, whitespace after
		toolFragment("1", "g", `"{\"b\":"`))
	if out := buf.String(); !strings.Contains(out, `"id":"call_1","name":"g"`) || !strings.Contains(out, `"partial_json":"{\"b\":"`) {
		t.Fatalf("the second call is not live before its last fragment:\n%s", out)
	}
	feed(t, s, toolFragment("1", "", `"2}"`))
	if !strings.Contains(buf.String(), `"partial_json":"2}"`) {
		t.Fatalf("the second call's last fragment did not stream on its own:\n%s", buf.String())
	}
	got := streamSummary(t, false,
		toolFragment("0", "f", `"[1,"`), toolFragment("0", "", `"[2]]"`),
		toolFragment("1", "g", `"{\"b\":"`), toolFragment("1", "", `"2}"`),
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`, `[DONE]`)
	want := []string{
		"start:tool_use@0", `input_json_delta:[1,@0`, `input_json_delta:[2]]@0`, "stop@0",
		"start:tool_use@1", `input_json_delta:{"b":@1`, `input_json_delta:2}@1`, "stop@1",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
}

// A call whose block closed because it was whole and the next one started
// cannot continue: its later fragment is malformed, as before calls were
// held.
func TestStreamSequentialToolCallResumedIsMalformed(t *testing.T) {
	s, _, _ := newTestStream(nil)
	feed(t, s, toolFragment("0", "f", `"{}"`), toolFragment("1", "g", `"{"`))
	if err := s.Chunk([]byte(toolFragment("0", "", `"{}"`))); !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("fragment of a closed call: %v", err)
	}
}

// While calls are held, a new index is held too even when the open call
// has become whole: closing the open block would write the held calls
// whole while they may still be coming. All come out in index order.
func TestStreamToolCallAfterHeldOnesIsHeld(t *testing.T) {
	chunks := []string{
		toolFragment("0", "f", `"{\"a\":"`),
		toolFragment("1", "g", `"{\"b\":"`),
		toolFragment("0", "", `"1}"`),
		toolFragment("2", "h", `"{\"c\":"`),
		toolFragment("1", "", `"2}"`),
		toolFragment("2", "", `"3}"`),
		`[DONE]`,
	}
	want := []string{
		"start:tool_use@0", `input_json_delta:{"a":@0`, `input_json_delta:1}@0`, "stop@0",
		"start:tool_use@1", `input_json_delta:{"b":2}@1`, "stop@1",
		"start:tool_use@2", `input_json_delta:{"c":3}@2`, "stop@2",
	}
	if got := streamSummary(t, false, chunks...); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
}

// argScan takes for whole only one closed object or array, across
// fragment boundaries, brackets and escapes inside strings included.
func TestArgScan(t *testing.T) {
	for _, c := range []struct {
		fragments []string
		whole     bool
	}{
		{[]string{`{"a":1}`}, true},
		{[]string{` {"a":`, `[1,{}]}`, "\n"}, true},
		{[]string{`[]`}, true},
		{[]string{`{"a":"}"`}, false},
		{[]string{`{"a":"\"}"`}, false},
		{[]string{`{"a":"\`, `"}"`, `}`}, true},
		{[]string{`{"a":"\\`, `"}`}, true},
		{[]string{`{"a":{}`}, false},
		{[]string{`{}{`}, false},
		{[]string{`{}`, `x`}, false},
		{[]string{`"x"`}, false},
		{[]string{`1`}, false},
		{[]string{``}, false},
		{[]string{`  `}, false},
	} {
		var a argScan
		for _, f := range c.fragments {
			a.feed(f)
		}
		if a.complete() != c.whole {
			t.Errorf("%q: complete %v, want %v", c.fragments, a.complete(), c.whole)
		}
	}
}
