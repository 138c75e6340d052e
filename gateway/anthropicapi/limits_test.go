package anthropicapi

import (
	"fmt"
	"strings"
	"testing"
)

// max_tokens may be exactly MaxOutputTokens; one more is refused.
func TestMaxTokensBoundIsInclusive(t *testing.T) {
	body := func(n int) []byte {
		return []byte(fmt.Sprintf(`{"model":"m","max_tokens":%d,"messages":[{"role":"user","content":"x"}]}`, n))
	}
	if r, e := ParseRequest(body(MaxOutputTokens)); e != nil || r.MaxTokens != MaxOutputTokens {
		t.Fatalf("max_tokens %d: %v", MaxOutputTokens, e)
	}
	if _, e := ParseRequest(body(MaxOutputTokens + 1)); e == nil || !strings.HasPrefix(e.Message, "max_tokens:") {
		t.Fatalf("max_tokens %d accepted: %v", MaxOutputTokens+1, e)
	}
}

// The blocks nested in a tool_result count toward MaxContentBlocks: one
// tool_result cannot carry an unbounded number of them.
func TestToolResultContentCountsTowardBlockLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[`)
	for i := 0; i < MaxContentBlocks; i++ { // with the tool_result itself: one too many
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":"x"}`)
	}
	b.WriteString(`]}]}]}`)
	if _, e := ParseRequest([]byte(b.String())); e == nil || !strings.Contains(e.Message, "content blocks") {
		t.Fatalf("a tool_result with %d blocks accepted: %v", MaxContentBlocks, e)
	}
}

// An upstream that reports usage with prompt_tokens 0 (some servers fill
// only completion_tokens) gets the edge's input estimate, as when it
// reports no usage at all, not an input of 0 tokens.
func TestRenderMessageZeroPromptTokensKeepsEstimate(t *testing.T) {
	out, err := RenderMessage([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":0,"completion_tokens":3}}`), "m", nil, 42, false)
	if err != nil || !strings.Contains(string(out), `"usage":{"input_tokens":42,"output_tokens":3}`) {
		t.Fatalf("%s, %v", out, err)
	}
}
