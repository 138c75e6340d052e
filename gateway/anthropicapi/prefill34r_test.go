package anthropicapi

import (
	"net/http"
	"testing"
)

// A prefill whose text ends in white space, one of only white space
// included, is refused as Anthropic's API refuses it (400
// invalid_request_error "final assistant content cannot end with trailing
// whitespace"), with thinking disabled as without it; white space inside
// the text, in an earlier block, or after a tool call (no prefill) is
// taken as before.
func TestPrefillTrailingWhitespaceRefused(t *testing.T) {
	for _, c := range []struct {
		last    string
		refused bool
	}{
		{`{"role":"assistant","content":"{\" "}`, true},
		{`{"role":"assistant","content":"   "}`, true},
		{`{"role":"assistant","content":"Once\n"}`, true},
		{`{"role":"assistant","content":"Once\u00a0"}`, true},
		{`{"role":"assistant","content":[{"type":"text","text":"Once"},{"type":"text","text":" "}]}`, true},
		{`{"role":"assistant","content":[{"type":"text","text":"Once "},{"type":"text","text":""}]}`, true},
		{`{"role":"assistant","content":"Once upon"}`, false},
		{`{"role":"assistant","content":[{"type":"text","text":"Once "},{"type":"text","text":"upon"}]}`, false},
		{`{"role":"assistant","content":[{"type":"text","text":"Let me look. "},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`, false},
		{`{"role":"assistant","content":""}`, false},
	} {
		for _, thinking := range []string{``, `,"thinking":{"type":"disabled"}`} {
			body := `{"model":"m","max_tokens":8,"tools":[{"name":"f","input_schema":{"type":"object"}}]` + thinking +
				`,"messages":[{"role":"user","content":"x"},` + c.last + `]}`
			r, e := ParseRequest([]byte(body))
			if !c.refused {
				if e != nil {
					t.Errorf("%s%s: refused: %+v", c.last, thinking, e)
				}
				continue
			}
			if e == nil || e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest ||
				e.Message != "messages: final assistant content cannot end with trailing whitespace" {
				t.Errorf("%s%s: %+v %+v", c.last, thinking, e, r)
			}
			if _, e := ParseCountRequest([]byte(body)); e == nil {
				t.Errorf("%s%s: count_tokens took it", c.last, thinking)
			}
		}
	}
}

// A final assistant message whose text blocks are all empty is no
// prefill, as an empty string content is not: its chat body drops it
// (appendAssistant), so vLLM's continuation would continue the user's
// turn, and thinking stays allowed with it.
func TestPrefillEmptyTextBlocksNone(t *testing.T) {
	for _, last := range []string{
		`{"role":"assistant","content":[{"type":"text","text":""}]}`,
		`{"role":"assistant","content":[{"type":"text","text":""},{"type":"text","text":""}]}`,
	} {
		r, e := ParseRequest([]byte(`{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"},` + last + `]}`))
		if e != nil || r.Prefill {
			t.Errorf("%s: %+v %+v", last, e, r)
		}
	}
}
