package anthropicapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// With display "omitted" a thinking block keeps its place and its
// signature and carries no text, as Anthropic streams it: no
// thinking_delta; reasoning after text opens a new (empty) block as shown
// reasoning would. The reasoning still counts in the output estimate.
func TestStreamThinkingOmitted(t *testing.T) {
	s, buf, _ := newTestStream(nil)
	s.thinking = true
	s.OmitThinking()
	feed(t, s,
		`{"choices":[{"index":0,"delta":{"reasoning":"plan "}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"more"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"again"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}`,
		`[DONE]`)
	sig := func(i string) string {
		return ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"signature_delta","signature":""}}`)
	}
	thinkStart := func(i string) string {
		return ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
	}
	textBlock := func(i, text string) string {
		return ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"text","text":""}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"text_delta","text":"`+text+`"}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":`+i+`}`)
	}
	want := ev("message_start", msgStart) +
		thinkStart("0") + sig("0") + ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		textBlock("1", "Hi") +
		thinkStart("2") + sig("2") + ev("content_block_stop", `{"type":"content_block_stop","index":2}`) +
		textBlock("3", "!") +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf, want)
	}
	checkEvents(t, buf.Bytes())
}

// An omitted thinking phase is silent but for pings: one for every
// HiddenThinkingPingBytes of reasoning after the block's start, as for
// hidden thinking, so a proxy's read timeout does not cut a model that
// thinks at length. Shown thinking needs none (its deltas show life).
func TestStreamThinkingOmittedPings(t *testing.T) {
	piece := `{"choices":[{"index":0,"delta":{"reasoning":"` + strings.Repeat("x", 512) + `"}}]}`
	const pieces = 40 // 20 KiB of reasoning
	for _, omit := range []bool{true, false} {
		var buf bytes.Buffer
		s := NewStreamWriter(&buf, nil, "m", 1, nil, true)
		if omit {
			s.OmitThinking()
		}
		for range pieces {
			feed(t, s, piece)
		}
		feed(t, s, `{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`, `[DONE]`)
		checkEvents(t, buf.Bytes())
		pings := strings.Count(buf.String(), "event: ping\n")
		deltas := strings.Count(buf.String(), `"thinking_delta"`)
		wantPings, wantDeltas := pieces*512/HiddenThinkingPingBytes, 0
		if !omit {
			wantPings, wantDeltas = 0, pieces
		}
		if pings != wantPings || deltas != wantDeltas || strings.Contains(buf.String(), "xxx") == omit {
			t.Errorf("omit %v: %d pings, %d thinking deltas; want %d, %d", omit, pings, deltas, wantPings, wantDeltas)
		}
	}
}

// A whole answer to a stream request (vLLM ignoring "stream") renders the
// omitted block the same way.
func TestStreamWholeThinkingOmitted(t *testing.T) {
	var buf bytes.Buffer
	s := NewStreamWriter(&buf, nil, "m", 1, nil, true)
	s.OmitThinking()
	if err := s.Whole([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"secret","content":"Hi"},"finish_reason":"stop"}]}`)); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, buf.Bytes())
	out := buf.String()
	if strings.Contains(out, "secret") || strings.Contains(out, "thinking_delta") ||
		!strings.Contains(out, `"content_block":{"type":"thinking","thinking":"","signature":""}`) || !strings.Contains(out, `"text":"Hi"`) {
		t.Fatalf("stream:\n%s", out)
	}
}

// RenderMessageOmitted answers as Anthropic does with display "omitted":
// the thinking block first, with empty thinking and signature, then the
// text; the reasoning counts in output_tokens as RenderMessage counts it.
// Without reasoning there is no thinking block, as with shown thinking.
func TestRenderMessageThinkingOmitted(t *testing.T) {
	body := []byte(`{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"secret thoughts","content":"Hi"},"finish_reason":"stop"}]}`)
	type msg struct {
		Content []map[string]any `json:"content"`
		Usage   struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	decode := func(b []byte, err error) msg {
		t.Helper()
		var m msg
		if err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatalf("%s, %v", b, err)
		}
		return m
	}
	omitted := decode(RenderMessageOmitted(body, "m", nil, 1))
	shown := decode(RenderMessage(body, "m", nil, 1, true))
	if len(omitted.Content) != 2 || omitted.Content[0]["type"] != "thinking" || omitted.Content[0]["thinking"] != "" ||
		omitted.Content[0]["signature"] != "" || omitted.Content[1]["text"] != "Hi" {
		t.Fatalf("omitted content %v", omitted.Content)
	}
	if shown.Content[0]["thinking"] != "secret thoughts" || omitted.Usage.OutputTokens != shown.Usage.OutputTokens {
		t.Fatalf("shown %v (%d tokens), omitted %d tokens", shown.Content, shown.Usage.OutputTokens, omitted.Usage.OutputTokens)
	}
	plain := decode(RenderMessageOmitted([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`), "m", nil, 1))
	if len(plain.Content) != 1 || plain.Content[0]["type"] != "text" {
		t.Fatalf("content without reasoning %v", plain.Content)
	}
}
