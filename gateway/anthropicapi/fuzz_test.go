package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},"stream":true,"stop_sequences":["x"],"temperature":0.2,"top_k":3,
		"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"q":1}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[{"type":"text","text":"e"}]}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"x"}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1e3,"messages":null}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"title":"T","type":"object"}}},"output_format":{"type":"json_schema","schema":{}}}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := ParseRequest(body)
		if e != nil {
			if r != nil || e.Status != 400 || e.Type != TypeInvalidRequest || e.Message == "" {
				t.Fatalf("bad failure %+v %+v", r, e)
			}
			return
		}
		if r.Model == "" || r.MaxTokens < 1 || len(r.messages) == 0 {
			t.Fatalf("accepted an invalid request: %+v", r)
		}
		out, err := r.OpenAIChat()
		if err != nil {
			t.Fatalf("OpenAIChat: %v", err)
		}
		var m struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
			Stream   bool              `json:"stream"`
		}
		if err := json.Unmarshal(out, &m); err != nil || m.Model != r.Model || m.Stream != r.Stream {
			t.Fatalf("bad chat body %s: %v", out, err)
		}
		var rf struct {
			ResponseFormat *struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string          `json:"name"`
					Schema json.RawMessage `json:"schema"`
					Strict bool            `json:"strict"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		if err := json.Unmarshal(out, &rf); err != nil || (rf.ResponseFormat == nil) != (r.format == nil) {
			t.Fatalf("response_format of %s: %v", out, err)
		}
		if f := rf.ResponseFormat; f != nil && (f.Type != "json_schema" || f.JSONSchema.Strict != r.format.strict || len(f.JSONSchema.Name) > 64 ||
			!validToolName(f.JSONSchema.Name) || len(f.JSONSchema.Schema) == 0 || f.JSONSchema.Schema[0] != '{') {
			t.Fatalf("bad response_format %s", out)
		}
		if CountTokens(r) < 4*len(r.messages) {
			t.Fatalf("count %d below framing", CountTokens(r))
		}
	})
}

// FuzzStreamWriter feeds arbitrary chunks (split on NUL bytes) and checks
// the output is always a well-formed event stream, whatever the input.
func FuzzStreamWriter(f *testing.F) {
	join := func(chunks ...string) []byte { return []byte(joinNUL(chunks)) }
	f.Add(join(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`), uint8(0))
	f.Add(join(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"t"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"g"}}]}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`), uint8(1))
	f.Add(join(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"error":{"message":"m"}}`, `{"choices":[{"index":0,"delta":{"content":"b"}}]}`), uint8(2))
	f.Add(join(`{"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}`, `garbage`), uint8(3))
	f.Add(join(`{"choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`, `{"choices":[{"index":0,"delta":{"reasoning_content":"m","content":"a"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"again"}}]}`, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f"}}]}}]}`, `[DONE]`), uint8(0))
	f.Add(join(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"mid"}}]}`, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"end"}}]}`, `[DONE]`), uint8(4))
	f.Fuzz(func(t *testing.T, input []byte, mode uint8) {
		var buf bytes.Buffer
		s := NewStreamWriter(&buf, nil, "m", 1, []string{"S"}, true)
		for i, c := range bytes.Split(input, []byte{0}) {
			if int(mode)%7 == i {
				if err := s.Ping(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Chunk(c); err != nil {
				if !errors.Is(err, ErrMalformedUpstream) {
					t.Fatalf("unexpected error %v", err)
				}
				if err := s.Fail(NewError(502, "bad upstream")); err != nil {
					t.Fatal(err)
				}
			}
		}
		switch mode % 3 {
		case 0:
			err := s.Finish()
			if err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := s.Fail(nil); err != nil {
				t.Fatal(err)
			}
		}
		checkEvents(t, buf.Bytes())
		if mode%3 != 2 && !s.Done() {
			t.Fatal("not done after Finish/Fail")
		}
	})
}

func joinNUL(chunks []string) string {
	var b bytes.Buffer
	for i, c := range chunks {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(c)
	}
	return b.String()
}

// FuzzStreamWhole: a whole chat.completion written as a stream (Whole) is a
// valid event sequence and fails only as ErrMalformedUpstream; where both
// it and RenderMessage take the body, they agree on the stop reason.
func FuzzStreamWhole(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":"b","function":{"name":"g","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"choices":[{"index":1,"message":{"content":"x"}}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"reasoning":"hm","content":"x","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"error":{"message":"m"}}`))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"S and more"},"finish_reason":"stop","stop_reason":"S"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var buf bytes.Buffer
		s := NewStreamWriter(&buf, nil, "m", 1, []string{"S"}, true)
		err := s.Whole(body)
		if err != nil {
			if !errors.Is(err, ErrMalformedUpstream) {
				t.Fatalf("unexpected error %v", err)
			}
			if err := s.Fail(NewError(502, "bad upstream")); err != nil {
				t.Fatal(err)
			}
		}
		checkEvents(t, buf.Bytes())
		if !s.Done() {
			t.Fatal("not done after Whole")
		}
		rendered, rerr := RenderMessage(body, "m", []string{"S"}, 0, true)
		if rerr != nil || s.Failure() != nil {
			return
		}
		var msg struct {
			StopReason string `json:"stop_reason"`
		}
		if err := json.Unmarshal(rendered, &msg); err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != s.StopReason() {
			t.Fatalf("stop reason: stream %q, message %q", s.StopReason(), msg.StopReason)
		}
	})
}
