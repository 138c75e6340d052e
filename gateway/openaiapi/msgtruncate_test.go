package openaiapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLongModelNameCutOnARune: a model name echoed in an error is cut to
// 256 bytes on a rune boundary, so the message stays valid UTF-8 and the
// envelope carries no replacement character for half a rune.
func TestLongModelNameCutOnARune(t *testing.T) {
	model := strings.Repeat("a", 255) + "é" + strings.Repeat("b", 10) // é spans bytes 255-256
	for _, e := range []*Error{ModelNotFound(model), QueueFull(model, 1), NoProviderAvailable(model), QueueTimeout(model)} {
		if !utf8.ValidString(e.Message) || strings.Contains(string(e.Envelope()), `\ufffd`) || strings.ContainsRune(string(e.Envelope()), utf8.RuneError) {
			t.Errorf("%s: message %q", e.Code, e.Message)
		}
		if !strings.Contains(e.Message, strings.Repeat("a", 255)+"…") {
			t.Errorf("%s: message %q, want the name cut before the é", e.Code, e.Message)
		}
	}
}

// TestFailedEmbeddingUsageIsEstimated: a failed embeddings run reports the
// prompt estimate as its usage, as the other renderers do.
func TestFailedEmbeddingUsageIsEstimated(t *testing.T) {
	a := NewEmbeddingAggregator(EmbeddingOptions{Model: "m", PromptTokens: 9})
	a.Add(evError("upstream_error", "boom", 0))
	if _, e := a.Result(); e == nil {
		t.Fatal("failed run rendered")
	}
	if u, reported := a.Usage(); reported || u.PromptTokens != 9 || u.TotalTokens != 9 {
		t.Fatalf("usage %+v (reported %v)", u, reported)
	}
}

// TestTextToolMarkFalseRestoresNothing: only openai_text_tool_fallback
// "true" marks a run; "false" leaves a <tool_call> block as content.
func TestTextToolMarkFalseRestoresNothing(t *testing.T) {
	block := `<tool_call>{"name":"lookup","arguments":{}}</tool_call>`
	resp, body, e := aggregate(t, RenderOptions{Model: "m", ToolNames: offered},
		evStart(nil), evDelta(block), evComplete("stop", nil, map[string]string{MetaTextToolFallback: "false"}))
	if e != nil {
		t.Fatal(e)
	}
	if m := resp.Choices[0].Message; m.Content != block || len(m.ToolCalls) != 0 {
		t.Fatalf("answer %s", body)
	}
}
