package anthropicapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// streamSummary renders chunks with a StreamWriter and summarises the
// stream: one entry per event, "start:<type>@<index>", "<delta type>:<text>
// @<index>", "stop@<index>".
func streamSummary(t *testing.T, thinking bool, chunks ...string) []string {
	t.Helper()
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, thinking)
	for _, c := range chunks {
		if err := s.Chunk([]byte(c)); err != nil {
			t.Fatalf("chunk %s: %v", c, err)
		}
	}
	checkEvents(t, buf.Bytes())
	var out []string
	for _, e := range strings.Split(strings.TrimSuffix(buf.String(), "\n\n"), "\n\n") {
		_, data, _ := strings.Cut(e, "\ndata: ")
		var v struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type                            string
				Text, Thinking, Signature, Part string
				PartialJSON                     string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatal(err)
		}
		switch v.Type {
		case "content_block_start":
			out = append(out, "start:"+v.ContentBlock.Type+"@"+itoa(v.Index))
		case "content_block_delta":
			out = append(out, v.Delta.Type+":"+v.Delta.Text+v.Delta.Thinking+v.Delta.Signature+v.Delta.PartialJSON+"@"+itoa(v.Index))
		case "content_block_stop":
			out = append(out, "stop@"+itoa(v.Index))
		}
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

var thinkingChunks = []string{
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"Let me"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":" think."}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"Sure."}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"A tool?"}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}`,
	`[DONE]`,
}

// With thinking enabled, reasoning streams as thinking blocks (thinking
// deltas, then an empty signature_delta, then the stop), text and tool
// calls as before, the block indexes consecutive; a reasoning piece after
// text opens a new thinking block, as Anthropic's interleaved thinking does.
func TestStreamThinkingBlocks(t *testing.T) {
	got := streamSummary(t, true, thinkingChunks...)
	want := []string{
		"start:thinking@0", "thinking_delta:Let me@0", "thinking_delta: think.@0", "signature_delta:@0", "stop@0",
		"start:text@1", "text_delta:Sure.@1", "stop@1",
		"start:thinking@2", "thinking_delta:A tool?@2", "signature_delta:@2", "stop@2",
		"start:tool_use@3", "input_json_delta:{}@3", "stop@3",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
}

// Without thinking (the request did not ask), reasoning is dropped: the
// stream is that of the same answer without reasoning.
func TestStreamThinkingDropped(t *testing.T) {
	got := streamSummary(t, false, thinkingChunks...)
	want := []string{"start:text@0", "text_delta:Sure.@0", "stop@0", "start:tool_use@1", "input_json_delta:{}@1", "stop@1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
}

// A whole answer: the reasoning is a thinking block before the others
// when thinking is enabled, absent otherwise; either name of the field is
// read, and the output estimate counts it.
func TestRenderMessageThinking(t *testing.T) {
	for _, field := range []string{"reasoning", "reasoning_content"} {
		body := `{"choices":[{"index":0,"message":{"role":"assistant","` + field + `":"Let me think.","content":"Hi",` +
			`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`
		out, err := RenderMessage([]byte(body), "m", nil, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Content    []json.RawMessage `json:"content"`
			StopReason string            `json:"stop_reason"`
			Usage      struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 3 || string(m.Content[0]) != `{"type":"thinking","thinking":"Let me think.","signature":""}` ||
			!strings.Contains(string(m.Content[1]), `"type":"text"`) || !strings.Contains(string(m.Content[2]), `"type":"tool_use"`) ||
			m.StopReason != StopToolUse {
			t.Errorf("%s: message %s", field, out)
		}
		withEstimate := m.Usage.OutputTokens

		out, err = RenderMessage([]byte(body), "m", nil, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 2 || bytes.Contains(out, []byte("thinking")) || m.Usage.OutputTokens != withEstimate {
			t.Errorf("%s without thinking: message %s (estimate %d, with thinking %d)", field, out, m.Usage.OutputTokens, withEstimate)
		}
	}
}

// thinking.type "enabled" and "adaptive" ask for thinking blocks;
// "disabled" or no thinking do not. The fields' types are checked, and an
// unknown type is refused (thinktype_test.go).
func TestParseThinking(t *testing.T) {
	base := `{"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"hi"}]`
	for in, want := range map[string]bool{
		``: false,
		`,"thinking":{"type":"enabled","budget_tokens":1024}`: true,
		`,"thinking":{"type":"adaptive"}`:                     true,
		`,"thinking":{"type":"disabled"}`:                     false,
		`,"thinking":null`:                                    false,
	} {
		r, e := ParseRequest([]byte(base + in + `}`))
		if e != nil {
			t.Fatalf("%s: %v", in, e)
		}
		if r.Thinking != want {
			t.Errorf("%s: Thinking %v, want %v", in, r.Thinking, want)
		}
	}
	for _, in := range []string{`,"thinking":"enabled"`, `,"thinking":{"type":1}`, `,"thinking":{"type":"enabled","budget_tokens":"1024"}`} {
		if _, e := ParseRequest([]byte(base + in + `}`)); e == nil || !strings.Contains(e.Message, "thinking") {
			t.Errorf("%s: %v, want an error naming thinking", in, e)
		}
	}
}
