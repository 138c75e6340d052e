package anthropicapi

import (
	"strings"
	"testing"
)

// thinking.type "disabled" is ThinkingOff; enabled and adaptive are
// Thinking; absent is neither, and an unknown or missing type is refused. The chat body
// carries none of it: the edge adds the effort to a run's input itself,
// where a backend can honour it.
func TestThinkingOffParsed(t *testing.T) {
	for _, c := range []struct {
		thinking string
		on, off  bool
	}{
		{`{"type":"disabled"}`, false, true},
		{`{"type":"disabled","budget_tokens":1024}`, false, true},
		{`{"type":"enabled","budget_tokens":1024}`, true, false},
		{`{"type":"enabled","budget_tokens":64000}`, true, false}, // at or over max_tokens, as Claude Code sends
		{`{"type":"adaptive"}`, true, false},
	} {
		r := mustParse(t, `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"thinking":`+c.thinking+`}`)
		if r.Thinking != c.on || r.ThinkingOff != c.off {
			t.Errorf("%s: Thinking %v, ThinkingOff %v", c.thinking, r.Thinking, r.ThinkingOff)
		}
		chat, err := r.OpenAIChat()
		if err != nil || strings.Contains(string(chat), "reasoning") || strings.Contains(string(chat), "think") {
			t.Errorf("%s: chat body %s (%v)", c.thinking, chat, err)
		}
	}
	for _, bad := range []string{`{"type":1}`, `{"type":"disabled","budget_tokens":"x"}`, `"disabled"`, `{"type":"off"}`, `{}`} {
		if _, e := ParseRequest([]byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"thinking":` + bad + `}`)); e == nil || e.Status != 400 {
			t.Errorf("%s: %v, want a 400", bad, e)
		}
	}
}
