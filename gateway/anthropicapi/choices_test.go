package anthropicapi

import (
	"errors"
	"strings"
	"testing"
)

// Only choice 0 is translated: a further choice (an upstream that honoured
// an n it was not sent, or a proxy that merges answers) adds no text, and
// its finish_reason does not decide the stop_reason.
func TestStreamTranslatesOnlyChoiceZero(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s,
		`{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}]}`,
		`[DONE]`)
	out := buf.String()
	if strings.Contains(out, "other") || !strings.Contains(out, `"text":"mine"`) || s.StopReason() != StopEndTurn {
		t.Fatalf("stop reason %s, stream:\n%s", s.StopReason(), out)
	}
}

// A tool call that continues after its block closed (here text after
// the calls closed it and wrote the held one) cannot be rendered: the
// stream is malformed rather than given a second tool_use block with the
// same call's remaining arguments, also when the fragment repeats the
// call's id and name (as some OpenAI-compatible servers send them with
// every fragment). Calls interleaved while a call's block is open are
// held instead (toolinterleave33_test.go).
func TestStreamToolCallResumedAfterAnotherIsMalformed(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"then"}}]}`)
	err := s.Chunk([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"1}"}}]}}]}`))
	if !errors.Is(err, ErrMalformedUpstream) || strings.Count(buf.String(), "event: content_block_start\n") != 3 {
		t.Fatalf("err %v, stream:\n%s", err, buf)
	}
}

// A whole answer (an upstream that ignored "stream": true) with two tool
// calls streams as two tool_use blocks: a message's calls carry no index,
// so they must not be taken for fragments of one call.
func TestStreamWholeAnswerKeepsEachToolCall(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	err := s.Whole([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"b\":2}"}}]},"finish_reason":"tool_calls"}]}`))
	out := buf.String()
	if err != nil || strings.Count(out, "event: content_block_start\n") != 2 || !strings.Contains(out, `"id":"call_b","name":"g"`) ||
		s.StopReason() != StopToolUse {
		t.Fatalf("err %v, stop reason %s, stream:\n%s", err, s.StopReason(), out)
	}
}
