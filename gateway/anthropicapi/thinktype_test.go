package anthropicapi

import (
	"net/http"
	"strings"
	"testing"
)

// thinking.type is one of the API's types: enabled, adaptive and
// between_tools show thinking, disabled turns it off; anything else is a
// 400 naming the field, as is a thinking object without a type (Anthropic
// refuses it too). No thinking asks for nothing.
func TestParseThinkingType(t *testing.T) {
	base := `{"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],"thinking":`
	for in, want := range map[string][2]bool{
		`{"type":"enabled","budget_tokens":1024}`: {true, false},
		`{"type":"adaptive"}`:                     {true, false},
		`{"type":"adaptive","display":"omitted"}`: {true, false},
		`{"type":"between_tools"}`:                {true, false},
		`{"type":"disabled"}`:                     {false, true},
		`null`:                                    {false, false},
	} {
		r, e := ParseRequest([]byte(base + in + `}`))
		if e != nil {
			t.Fatalf("%s: %v", in, e)
		}
		if r.Thinking != want[0] || r.ThinkingOff != want[1] {
			t.Errorf("%s: Thinking %v, ThinkingOff %v; want %v", in, r.Thinking, r.ThinkingOff, want)
		}
	}
	for _, in := range []string{`{"type":"other"}`, `{"type":""}`, `{"type":"DISABLED"}`, `{"type":"auto"}`,
		`{"budget_tokens":1024}`, `{}`, `{"type":null}`} {
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			_, e := parse([]byte(base + in + `}`))
			if e == nil || e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || !strings.HasPrefix(e.Message, "thinking.type: ") {
				t.Errorf("%s: %+v, want a 400 naming thinking.type", in, e)
			}
		}
	}
}
