package anthropicapi

import (
	"encoding/json"
	"net/http"
	"testing"
)

// A tool's "strict": true (Anthropic's strict tool use) is OpenAI's
// function.strict: true in every rendering (OpenAIChat, which a run is
// parsed from, and TunnelChat for each reasoning member); false, null and
// absent send no strict member.
func TestToolStrictRendered(t *testing.T) {
	body := `{"model":"m","max_tokens":16,"messages":[
		{"role":"user","content":"a"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"b"}]},
		{"role":"user","content":"c"}],
	"tools":[
		{"name":"s","input_schema":{"type":"object","additionalProperties":false},"strict":true},
		{"name":"f","input_schema":{"type":"object"},"strict":false},
		{"name":"n","input_schema":{"type":"object"},"strict":null},
		{"name":"a","input_schema":{"type":"object"}}]}`
	r := mustParse(t, body)
	chat, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	renderings := map[string][]byte{"OpenAIChat": chat}
	for _, m := range []ReasoningMember{ReasoningNone, ReasoningVLLM, ReasoningContent} {
		b, err := r.TunnelChat(chat, m)
		if err != nil {
			t.Fatal(err)
		}
		renderings["TunnelChat "+string(m)] = b
	}
	for name, b := range renderings {
		var got struct {
			Tools []struct {
				Function map[string]json.RawMessage `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(b, &got); err != nil || len(got.Tools) != 4 {
			t.Fatalf("%s: %v %s", name, err, b)
		}
		if s := string(got.Tools[0].Function["strict"]); s != "true" {
			t.Errorf("%s: strict tool rendered with strict %q: %s", name, s, b)
		}
		for _, tl := range got.Tools[1:] {
			if s, ok := tl.Function["strict"]; ok {
				t.Errorf("%s: tool without strict rendered with strict %s", name, s)
			}
		}
	}
}

// A strict that is not a boolean is Anthropic's 400 invalid_request_error
// naming the field, on messages and count_tokens alike.
func TestToolStrictNotBooleanRefused(t *testing.T) {
	for _, v := range []string{`"true"`, `1`, `{}`, `[]`} {
		body := `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"a"}],"tools":[` +
			`{"name":"a","input_schema":{"type":"object"}},{"name":"b","input_schema":{"type":"object"},"strict":` + v + `}]}`
		for name, parse := range map[string]func([]byte) *Error{
			"messages":     func(b []byte) *Error { _, e := ParseRequest(b); return e },
			"count_tokens": func(b []byte) *Error { _, e := ParseCountRequest(b); return e },
		} {
			e := parse([]byte(body))
			if e == nil || e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest || e.Message != "tools.1.strict: expected a boolean" {
				t.Errorf("%s, strict %s: %+v", name, v, e)
			}
		}
	}
}
