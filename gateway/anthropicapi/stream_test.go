package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// newTestStream is a StreamWriter on a buffer with a fixed message id, and
// a counter of flushes.
func newTestStream(stops []string) (*StreamWriter, *bytes.Buffer, *int) {
	var buf bytes.Buffer
	flushes := 0
	s := NewStreamWriter(&buf, func() { flushes++ }, "claude-x", 42, stops, false)
	s.id = "msg_test"
	return s, &buf, &flushes
}

func ev(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

const msgStart = `{"type":"message_start","message":{"id":"msg_test","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":42,"output_tokens":0}}}`

func feed(t *testing.T, s *StreamWriter, chunks ...string) {
	t.Helper()
	for _, c := range chunks {
		if err := s.Chunk([]byte(c)); err != nil {
			t.Fatalf("Chunk(%s): %v", c, err)
		}
	}
}

func TestStreamText(t *testing.T) {
	s, buf, flushes := newTestStream(nil)
	feed(t, s, `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`)
	if s.Started() || buf.Len() != 0 {
		t.Fatalf("role-only chunk wrote %q", buf)
	}
	feed(t, s,
		`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`,
		`{"choices":[{"index":0,"delta":{"content":"lo <\"x\">"},"finish_reason":null}],"usage":null}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":null}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":3,"total_tokens":43}}`,
		`[DONE]`)
	want := ev("message_start", msgStart) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo <\"x\">"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":40,"output_tokens":3}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf, want)
	}
	if *flushes != 7 || !s.Done() || s.StopReason() != StopEndTurn || s.Failure() != nil {
		t.Fatalf("flushes %d done %v reason %s", *flushes, s.Done(), s.StopReason())
	}
	// Everything after the end is ignored.
	feed(t, s, `{"choices":[{"index":0,"delta":{"content":"late"}}]}`)
	if err := s.Finish(); err != nil || buf.String() != want {
		t.Fatalf("wrote after the end: %v", err)
	}
	if err := s.Fail(nil); err != nil || buf.String() != want {
		t.Fatalf("failed after the end: %v", err)
	}
}

func TestStreamToolFragments(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Paris\"}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"time","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	want := ev("message_start", msgStart) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"call_a","name":"get_weather","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ty\": \"Paris\"}"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_b","name":"time","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		// No usage chunk: 11+4+13+4+2 = 34 bytes → 9 tokens estimated.
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf, want)
	}
}

func TestStreamTextThenToolThenText(t *testing.T) {
	s, buf, _ := newTestStream([]string{"STOP"})
	feed(t, s,
		`{"choices":[{"index":0,"delta":{"content":"Checking."}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"done"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"STOP"}],"usage":{"prompt_tokens":0,"completion_tokens":7}}`,
		" [DONE] ")
	out := buf.String()
	want := ev("message_start", msgStart) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	if !strings.HasPrefix(out, want) {
		t.Fatalf("got\n%s", out)
	}
	rest := out[len(want):]
	if !strings.HasPrefix(rest, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_") {
		t.Fatalf("tool block: %s", rest)
	}
	tail := ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"done"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":2}`) +
		// a tool call was made: tool_use wins over the stop sequence.
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	if !strings.HasSuffix(rest, tail) {
		t.Fatalf("got\n%s\nwant suffix\n%s", rest, tail)
	}
	checkEvents(t, buf.Bytes())
}

func TestStreamStopSequence(t *testing.T) {
	s, buf, _ := newTestStream([]string{"###"})
	feed(t, s, `{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop","stop_reason":"###"}]}`, `[DONE]`)
	if !strings.Contains(buf.String(), `"delta":{"stop_reason":"stop_sequence","stop_sequence":"###"}`) {
		t.Fatalf("%s", buf)
	}
	s, buf, _ = newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}`, `[DONE]`)
	if !strings.Contains(buf.String(), `"delta":{"stop_reason":"max_tokens","stop_sequence":null}`) {
		t.Fatalf("%s", buf)
	}
}

func TestStreamEmptyAndPing(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	if err := s.Ping(); err != nil {
		t.Fatal(err)
	}
	if !s.Started() {
		t.Fatal("ping did not start the stream")
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	want := ev("message_start", msgStart) + ev("ping", `{"type":"ping"}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":0}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	if buf.String() != want {
		t.Fatalf("got\n%s", buf)
	}
}

func TestStreamFailMidStream(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a"}}]}}]}`)
	if err := s.Fail(NewError(529, "Overloaded")); err != nil {
		t.Fatal(err)
	}
	want := ev("message_start", msgStart) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"c","name":"f","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}`) +
		ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf, want)
	}
	if err := s.Finish(); err != nil || buf.String() != want || !s.Done() || s.Failure().Type != TypeOverloaded {
		t.Fatalf("after Fail: %v %s", err, buf)
	}
}

func TestStreamUpstreamErrorEvent(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"content":"partial"}}]}`,
		`{"error":{"message":"The provider stream ended unexpectedly.","type":"server_error","param":null,"code":"upstream_error"}}`)
	if !strings.HasSuffix(buf.String(), ev("error", `{"type":"error","error":{"type":"api_error","message":"The provider stream ended unexpectedly."}}`)) {
		t.Fatalf("%s", buf)
	}
	if strings.Contains(buf.String(), "message_stop") || strings.Contains(buf.String(), "content_block_stop") || !s.Done() {
		t.Fatalf("stream looked complete: %s", buf)
	}
	checkEvents(t, buf.Bytes())
}

func TestStreamMalformed(t *testing.T) {
	cases := []string{
		`nope`,
		`{"choices":[{"index":0,"delta":{"content":5}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`, // no name
	}
	for _, c := range cases {
		s, buf, _ := newTestStream(nil)
		if err := s.Chunk([]byte(c)); !errors.Is(err, ErrMalformedUpstream) {
			t.Errorf("%s: %v", c, err)
		}
		if s.Started() || buf.Len() != 0 {
			t.Errorf("%s: wrote %q", c, buf)
		}
	}
	// A tool call continued after its block closed cannot be translated.
	s, buf, _ := newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"x"}}]}`)
	err := s.Chunk([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`))
	if !errors.Is(err, ErrMalformedUpstream) {
		t.Fatalf("interleaved: %v", err)
	}
	if err := s.Fail(NewError(502, "bad upstream")); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, buf.Bytes())
}

type failWriter struct{ n int }

var errBroken = errors.New("broken pipe")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errBroken
	}
	w.n--
	return len(p), nil
}

func TestStreamWriteError(t *testing.T) {
	w := &failWriter{n: 1}
	s := NewStreamWriter(w, nil, "m", 0, nil, false)
	err := s.Chunk([]byte(`{"choices":[{"index":0,"delta":{"content":"x"}}]}`))
	if !errors.Is(err, errBroken) {
		t.Fatalf("write error not returned: %v", err)
	}
	for _, err := range []error{s.Chunk([]byte(`{"choices":[]}`)), s.Ping(), s.Finish(), s.Fail(nil)} {
		if !errors.Is(err, errBroken) {
			t.Fatalf("later call: %v", err)
		}
	}
	if w.n != 0 {
		t.Fatal("writes after the error")
	}
}

func TestStreamFailBeforeStart(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	if err := s.Fail(NewError(503, "no capacity")); err != nil {
		t.Fatal(err)
	}
	if buf.String() != ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"no capacity"}}`) {
		t.Fatalf("%s", buf)
	}
}

// checkEvents asserts out is a well-formed Messages event stream: every
// event is `event: NAME\ndata: JSON\n\n` with data.type == NAME, starting
// with message_start (or a lone error), blocks opened in index order from 0
// with deltas of the right kind only to the open block, and ending with
// message_stop after message_delta or with error; nothing after the end.
func checkEvents(t testing.TB, out []byte) {
	t.Helper()
	if err := validateEvents(out); err != nil {
		t.Fatalf("%v\nstream:\n%s", err, out)
	}
}

func validateEvents(out []byte) error {
	if len(out) == 0 {
		return nil
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		return errors.New("stream does not end with a blank line")
	}
	events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	started, ended, deltaSeen := false, false, false
	next, open, openType := 0, -1, ""
	signed := false // the open thinking block had its signature_delta
	for i, e := range events {
		name, data, ok := strings.Cut(e, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") || strings.Contains(data, "\n") {
			return fmt.Errorf("event %d malformed: %q", i, e)
		}
		name = strings.TrimPrefix(name, "event: ")
		var v struct {
			Type         string `json:"type"`
			Index        *int   `json:"index"`
			ContentBlock *struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Input json.RawMessage `json:"input"`
			} `json:"content_block"`
			Delta *struct {
				Type string `json:"type"`
			} `json:"delta"`
			Error *struct{ Type, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return fmt.Errorf("event %d data not JSON: %v", i, err)
		}
		if v.Type != name {
			return fmt.Errorf("event %d: name %s, type %s", i, name, v.Type)
		}
		if ended {
			return fmt.Errorf("event %d (%s) after the end", i, name)
		}
		if !started && name != "message_start" && name != "error" {
			return fmt.Errorf("event %d (%s) before message_start", i, name)
		}
		switch name {
		case "message_start":
			if started {
				return fmt.Errorf("event %d: second message_start", i)
			}
			started = true
		case "ping":
		case "content_block_start":
			if open >= 0 || v.Index == nil || *v.Index != next || v.ContentBlock == nil || deltaSeen {
				return fmt.Errorf("event %d: bad block start (open %d next %d)", i, open, next)
			}
			openType = v.ContentBlock.Type
			if openType == "tool_use" && (v.ContentBlock.ID == "" || string(v.ContentBlock.Input) != "{}") {
				return fmt.Errorf("event %d: bad tool_use start", i)
			}
			if openType != "tool_use" && openType != "text" && openType != "thinking" {
				return fmt.Errorf("event %d: block type %s", i, openType)
			}
			if openType == "thinking" && data != fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, next) {
				return fmt.Errorf("event %d: bad thinking start %s", i, data)
			}
			open, next, signed = next, next+1, false
		case "content_block_delta":
			if v.Index == nil || *v.Index != open || v.Delta == nil ||
				(openType == "text") != (v.Delta.Type == "text_delta") ||
				(openType == "tool_use") != (v.Delta.Type == "input_json_delta") ||
				(openType == "thinking") != (v.Delta.Type == "thinking_delta" || v.Delta.Type == "signature_delta") || signed {
				return fmt.Errorf("event %d: bad delta", i)
			}
			signed = v.Delta.Type == "signature_delta"
		case "content_block_stop":
			if v.Index == nil || *v.Index != open || (openType == "thinking" && !signed) {
				return fmt.Errorf("event %d: stop of a block not open (or a thinking block without its signature)", i)
			}
			open = -1
		case "message_delta":
			if open >= 0 || deltaSeen {
				return fmt.Errorf("event %d: message_delta with a block open or twice", i)
			}
			deltaSeen = true
		case "message_stop":
			if !deltaSeen {
				return fmt.Errorf("event %d: message_stop without message_delta", i)
			}
			ended = true
		case "error":
			if v.Error == nil || v.Error.Type == "" || v.Error.Message == "" {
				return fmt.Errorf("event %d: bad error", i)
			}
			ended = true
		default:
			return fmt.Errorf("event %d: unknown event %s", i, name)
		}
	}
	return nil
}
