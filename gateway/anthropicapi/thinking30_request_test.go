package anthropicapi

import (
	"net/http"
	"testing"
)

// The thinking object is read as Anthropic's API reads it: type required;
// "enabled" needs an integer budget_tokens of at least 1024; display is
// "summarized" or "omitted" ("updates", a beta hiding the reasoning, reads
// as omitted). A budget on another type is checked for its type only, and
// display is not read on "disabled". Refusals are 400
// invalid_request_error with Anthropic's wording, on count_tokens too.
func TestParseThinkingConfig(t *testing.T) {
	base := `{"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],"thinking":`
	type want struct {
		on, off, omitted bool
		budget           int
	}
	for in, w := range map[string]want{
		`{"type":"enabled","budget_tokens":1024}`:                        {on: true, budget: 1024},
		`{"type":"enabled","budget_tokens":1024,"display":"summarized"}`: {on: true, budget: 1024},
		`{"type":"enabled","budget_tokens":1500,"display":"omitted"}`:    {on: true, omitted: true, budget: 1500},
		`{"type":"enabled","budget_tokens":99999}`:                       {on: true, budget: 99999}, // over max_tokens: CheckThinkingBudget's
		`{"type":"adaptive"}`:                                            {on: true},
		`{"type":"adaptive","display":"omitted"}`:                        {on: true, omitted: true},
		`{"type":"adaptive","display":"updates"}`:                        {on: true, omitted: true},
		`{"type":"adaptive","display":null}`:                             {on: true},
		`{"type":"adaptive","budget_tokens":5}`:                          {on: true},
		`{"type":"between_tools","display":"omitted"}`:                   {on: true, omitted: true},
		`{"type":"disabled","budget_tokens":0,"display":"anything"}`:     {off: true},
		`null`: {},
	} {
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			r, e := parse([]byte(base + in + `}`))
			if e != nil {
				t.Fatalf("%s: %v", in, e)
			}
			if got := (want{r.Thinking, r.ThinkingOff, r.ThinkingOmitted, r.ThinkingBudget}); got != w {
				t.Errorf("%s: %+v, want %+v", in, got, w)
			}
		}
	}
	for in, msg := range map[string]string{
		`{}`:                                 "thinking.type: Field required",
		`{"budget_tokens":1024}`:             "thinking.type: Field required",
		`{"type":null,"budget_tokens":1024}`: "thinking.type: Field required",
		`{"type":"enabled"}`:                 "thinking.enabled.budget_tokens: Field required",
		`{"type":"enabled","budget_tokens":null}`:                       "thinking.enabled.budget_tokens: Field required",
		`{"type":"enabled","budget_tokens":1023}`:                       "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
		`{"type":"enabled","budget_tokens":-5000}`:                      "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
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

// An "enabled" budget must be below max_tokens unless the request carries
// the interleaved-thinking beta, in any of its anthropic-beta lines and
// anywhere in a comma-separated list. A count_tokens request without
// max_tokens, and a type without a budget, are not bounded.
func TestCheckThinkingBudget(t *testing.T) {
	const over = "`max_tokens` must be greater than `thinking.budget_tokens`."
	for _, c := range []struct {
		body  string
		betas []string
		want  string
	}{
		{`"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2047}`, nil, ""},
		{`"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2048}`, nil, over},
		{`"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":31999}`, nil, over},
		{`"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":31999}`, []string{"interleaved-thinking-2025-05-14"}, ""},
		{`"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":31999}`, []string{"a-1", "b-2 , interleaved-thinking-2025-05-14"}, ""},
		{`"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":31999}`, []string{"interleaved-thinking-2025-05-15", "interleaved-thinking"}, over},
		{`"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":31999}`, []string{"interleaved-thinking-2025-05-14x"}, over},
		{`"max_tokens":8,"thinking":{"type":"adaptive","budget_tokens":31999}`, nil, ""},
		{`"max_tokens":8,"thinking":{"type":"disabled","budget_tokens":31999}`, nil, ""},
		{`"max_tokens":8`, nil, ""},
	} {
		r := mustParse(t, `{"model":"m",`+c.body+`,"messages":[{"role":"user","content":"hi"}]}`)
		e := r.CheckThinkingBudget(c.betas)
		if (c.want == "" && e != nil) || (c.want != "" && (e == nil || e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Message != c.want)) {
			t.Errorf("%s, betas %q: %+v, want %q", c.body, c.betas, e, c.want)
		}
	}
	r, e := ParseCountRequest([]byte(`{"model":"m","thinking":{"type":"enabled","budget_tokens":50000},"messages":[{"role":"user","content":"hi"}]}`))
	if e != nil || r.CheckThinkingBudget(nil) != nil {
		t.Fatalf("count_tokens without max_tokens: %v", e)
	}
}
