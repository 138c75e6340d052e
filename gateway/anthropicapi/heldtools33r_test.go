package anthropicapi

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Reasoning that comes while calls are held is held too (thinking on),
// and shown once the open call's block closes, before the held calls: the
// held calls' later fragments are still theirs. Before, the reasoning
// closed the open block, wrote the held calls as they were, and their
// next fragment failed the stream as malformed.
func TestStreamReasoningWhileToolCallsHeld(t *testing.T) {
	got := streamSummary(t, true,
		toolFragment("0", "f", `"{\"a\":"`),
		toolFragment("1", "g", `"{\"b\":"`),
		`{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`,
		toolFragment("1", "", `"2}"`),
		toolFragment("0", "", `"1}"`),
		`[DONE]`)
	want := []string{
		"start:tool_use@0", `input_json_delta:{"a":@0`, `input_json_delta:1}@0`, "stop@0",
		"start:thinking@1", "thinking_delta:hmm@1", "signature_delta:@1", "stop@1",
		"start:tool_use@2", `input_json_delta:{"b":2}@2`, "stop@2",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
}

// A call that resumes after its block closed is malformed also when the
// next call is open and incomplete and the fragment repeats the call's id
// and name: it is not a new call to hold.
func TestStreamClosedToolCallNotHeldAgain(t *testing.T) {
	s, _, _ := newTestStream(nil)
	feed(t, s, toolFragment("0", "f", `"{\"a\":1}"`), toolFragment("1", "g", `"{\"b\":"`))
	if err := s.Chunk([]byte(toolFragment("0", "f", `"{\"a\":2}"`))); !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("a closed call's fragment: %v", err)
	}
}

// manyCalls is one chunk starting calls from..to-1, each named "g" with
// no arguments.
func manyCalls(from, to int) string {
	var b strings.Builder
	b.WriteString(`{"choices":[{"index":0,"delta":{"tool_calls":[`)
	for i := from; i < to; i++ {
		if i > from {
			b.WriteByte(',')
		}
		b.WriteString(`{"index":` + strconv.Itoa(i) + `,"id":"c","type":"function","function":{"name":"g","arguments":""}}`)
	}
	b.WriteString(`]}}]}`)
	return b.String()
}

// Each held call costs heldToolCost besides its name and arguments: many
// held calls without arguments reach the hold bound as their bytes do.
func TestStreamManyHeldToolCallsBounded(t *testing.T) {
	s, _, _ := newTestStream(nil)
	feed(t, s, toolFragment("0", "f", `"{"`))
	limit := MaxHeldThinkingBytes/(heldToolCost+1) + 1
	var err error
	for i := 1; i <= limit && err == nil; i += 1000 {
		err = s.Chunk([]byte(manyCalls(i, min(i+1000, limit+1))))
	}
	if !errors.Is(err, ErrMalformedUpstream) {
		t.Errorf("%d held calls: %v", limit, err)
	}
}

// The hold bound is inclusive: calls holding exactly MaxHeldThinkingBytes
// are held; a byte more is malformed.
func TestStreamHeldToolCallsExactBound(t *testing.T) {
	args := MaxHeldThinkingBytes - heldToolCost - 1
	for _, extra := range []int{0, 1} {
		s, _, _ := newTestStream(nil)
		feed(t, s, toolFragment("0", "f", `"{"`))
		err := s.Chunk([]byte(toolFragment("1", "g", `"`+strings.Repeat("x", args+extra)+`"`)))
		if (extra == 0) != (err == nil) {
			t.Errorf("%d bytes held: %v", args+extra+heldToolCost+1, err)
		}
	}
}

// What held calls write counts in the output estimate of a stream without
// usage, as a live call's name and arguments do; a held call without
// arguments gets no input_json_delta, as Anthropic's blocks start with
// their input {}.
func TestStreamHeldToolCallsCounted(t *testing.T) {
	name, args := strings.Repeat("n", 400), strings.Repeat("a", 800)
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, false)
	feed(t, s,
		toolFragment("0", "f", `"{"`),
		toolFragment("1", name, `"`+args+`"`),
		toolFragment("2", "h", `""`),
		`[DONE]`)
	want := `"output_tokens":` + strconv.Itoa(estimateOutput(len("f{")+len(name)+len(args)+len("h"))) + `}`
	if out := buf.String(); !strings.Contains(out, want) || strings.Count(out, "input_json_delta") != 2 {
		t.Errorf("want %s and 2 input_json_delta, stream:\n%s", want, out)
	}
}

// What held calls held is given back when they are written: calls held
// later, behind another open call, have the whole bound again.
func TestStreamHeldToolCallsBoundReset(t *testing.T) {
	s, _, _ := newTestStream(nil)
	piece := `"` + strings.Repeat("x", MaxHeldThinkingBytes*3/4) + `"`
	feed(t, s,
		toolFragment("0", "f", `"{"`), toolFragment("1", "g", piece),
		`{"choices":[{"index":0,"delta":{"content":"between"}}]}`,
		toolFragment("2", "h", `"{"`), toolFragment("3", "k", piece))
}

// Each call that streams live is judged whole on its own arguments: the
// third of three calls sent one after the other streams live too.
func TestStreamThirdSequentialToolCallLive(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, false)
	feed(t, s,
		toolFragment("0", "f", `"{}"`),
		toolFragment("1", "g", `"{\"b\":"`), toolFragment("1", "", `"2}"`),
		toolFragment("2", "h", `"{"`))
	if !strings.Contains(buf.String(), `"id":"call_2","name":"h"`) {
		t.Errorf("the third call is not live:\n%s", buf.String())
	}
}
