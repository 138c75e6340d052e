package anthropicapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A chunk carrying reasoning and text at once (the switch from thinking to
// the answer) has its thinking block first: the model thought, then wrote.
func TestStreamThinkingBeforeTextInOneChunk(t *testing.T) {
	got := streamSummary(t, true,
		`{"choices":[{"index":0,"delta":{"reasoning":"Hmm.","content":"Hi"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`)
	want := []string{"start:thinking@0", "thinking_delta:Hmm.@0", "signature_delta:@0", "stop@0", "start:text@1", "text_delta:Hi@1", "stop@1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
}

// When a backend fills both names with different text, "reasoning" (the
// current vLLM name, and the run path's) is the one shown, in a stream and
// in a whole message.
func TestThinkingReasoningNameWins(t *testing.T) {
	got := streamSummary(t, true,
		`{"choices":[{"index":0,"delta":{"reasoning":"new","reasoning_content":"old"}}]}`, `[DONE]`)
	if want := []string{"start:thinking@0", "thinking_delta:new@0", "signature_delta:@0", "stop@0"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
	out, err := RenderMessage([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"new","reasoning_content":"old","content":"Hi"},"finish_reason":"stop"}]}`), "m", nil, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"thinking":"new"`)) || bytes.Contains(out, []byte("old")) {
		t.Errorf("message %s, want the thinking block of reasoning", out)
	}
}

// outputTokens is the usage.output_tokens of a rendered message or of a
// stream's message_delta.
func outputTokens(t *testing.T, out []byte) int {
	t.Helper()
	if i := bytes.Index(out, []byte("event: message_delta\ndata: ")); i >= 0 {
		out = out[i+len("event: message_delta\ndata: "):]
		out = out[:bytes.IndexByte(out, '\n')]
	}
	var m struct {
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return m.Usage.OutputTokens
}

// With no usage from the upstream, the output estimate counts the
// reasoning the model generated, shown or not: a long thought is not free.
func TestThinkingCountsInOutputEstimate(t *testing.T) {
	long := strings.Repeat("think ", 400)
	for _, thinking := range []bool{true, false} {
		stream := func(chunks ...string) int {
			var buf bytes.Buffer
			s := NewStreamWriter(&buf, nil, "m", 1, nil, thinking)
			for _, c := range chunks {
				if err := s.Chunk([]byte(c)); err != nil {
					t.Fatal(err)
				}
			}
			return outputTokens(t, buf.Bytes())
		}
		plain := stream(`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`, `[DONE]`)
		reasoned := stream(`{"choices":[{"index":0,"delta":{"reasoning":"`+long+`"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`, `[DONE]`)
		if reasoned < plain+100 {
			t.Errorf("thinking %v: stream estimate %d with %d bytes of reasoning, %d without", thinking, reasoned, len(long), plain)
		}

		render := func(body string) int {
			out, err := RenderMessage([]byte(body), "m", nil, 1, thinking)
			if err != nil {
				t.Fatal(err)
			}
			return outputTokens(t, out)
		}
		plain = render(`{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`)
		reasoned = render(`{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"` + long + `","content":"Hi"},"finish_reason":"stop"}]}`)
		if reasoned < plain+100 {
			t.Errorf("thinking %v: message estimate %d with %d bytes of reasoning, %d without", thinking, reasoned, len(long), plain)
		}
	}
}

// A thinking object without a type is refused, as Anthropic's API refuses
// it: it asks for no mode the edge could honour.
func TestParseThinkingWithoutType(t *testing.T) {
	_, e := ParseRequest([]byte(`{"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],"thinking":{"budget_tokens":2000}}`))
	if e == nil || e.Status != 400 || e.Message != "thinking.type: Field required" {
		t.Fatalf("%+v, want a 400 thinking.type: Field required", e)
	}
}
