package anthropicapi

import (
	"net/http"
	"testing"
)

// The thinking object is read as Anthropic's API reads it: type required;
// display is "summarized" or "omitted" ("updates", a beta hiding the
// reasoning, reads as omitted), not read on "disabled". budget_tokens is
// checked for its type only, on every type (missing, small or over
// max_tokens: nothing reads it, and clients send such budgets). Refusals
// are 400 invalid_request_error with Anthropic's wording, on count_tokens
// too.
func TestParseThinkingConfig(t *testing.T) {
	base := `{"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],"thinking":`
	type want struct{ on, off, omitted bool }
	for in, w := range map[string]want{
		`{"type":"enabled","budget_tokens":1024}`:                        {on: true},
		`{"type":"enabled","budget_tokens":1024,"display":"summarized"}`: {on: true},
		`{"type":"enabled","budget_tokens":1500,"display":"omitted"}`:    {on: true, omitted: true},
		`{"type":"enabled","budget_tokens":99999}`:                       {on: true}, // over max_tokens
		`{"type":"enabled"}`:                                         {on: true},
		`{"type":"enabled","budget_tokens":null}`:                    {on: true},
		`{"type":"enabled","budget_tokens":1023}`:                    {on: true},
		`{"type":"enabled","budget_tokens":-5000}`:                   {on: true},
		`{"type":"adaptive"}`:                                        {on: true},
		`{"type":"adaptive","display":"omitted"}`:                    {on: true, omitted: true},
		`{"type":"adaptive","display":"updates"}`:                    {on: true, omitted: true},
		`{"type":"adaptive","display":null}`:                         {on: true},
		`{"type":"adaptive","budget_tokens":5}`:                      {on: true},
		`{"type":"between_tools","display":"omitted"}`:               {on: true, omitted: true},
		`{"type":"disabled","budget_tokens":0,"display":"anything"}`: {off: true},
		`null`: {},
	} {
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			r, e := parse([]byte(base + in + `}`))
			if e != nil {
				t.Fatalf("%s: %v", in, e)
			}
			if got := (want{r.Thinking, r.ThinkingOff, r.ThinkingOmitted}); got != w {
				t.Errorf("%s: %+v, want %+v", in, got, w)
			}
		}
	}
	for in, msg := range map[string]string{
		`{}`:                                                            "thinking.type: Field required",
		`{"budget_tokens":1024}`:                                        "thinking.type: Field required",
		`{"type":null,"budget_tokens":1024}`:                            "thinking.type: Field required",
		`{"type":"enabled","budget_tokens":2e3}`:                        "thinking.budget_tokens: expected an integer",
		`{"type":"enabled","budget_tokens":"2048"}`:                     "thinking.budget_tokens: expected an integer",
		`{"type":"adaptive","budget_tokens":1.5}`:                       "thinking.budget_tokens: expected an integer",
		`{"type":"adaptive","display":"full"}`:                          "thinking.display: must be one of summarized, omitted",
		`{"type":"adaptive","display":""}`:                              "thinking.display: must be one of summarized, omitted",
		`{"type":"adaptive","display":"OMITTED"}`:                       "thinking.display: must be one of summarized, omitted",
		`{"type":"adaptive","display":true}`:                            "thinking.display: expected a string",
		`{"type":"enabled","budget_tokens":1024,"display":["omitted"]}`: "thinking.display: expected a string",
	} {
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			_, e := parse([]byte(base + in + `}`))
			if e == nil || e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Message != msg {
				t.Errorf("%s: %+v, want a 400 %q", in, e, msg)
			}
		}
	}
}
