package anthropicapi

import (
	"encoding/json"
	"net/http"
	"testing"
)

// output_config.effort is read as Anthropic's API reads it (low, medium,
// high, xhigh, max; a wrong type or value is a 400 naming the field, on
// count_tokens too) and reaches the chat body as reasoning_effort: "high",
// Anthropic's default, as nothing; "max", past OpenAI's scale, as "xhigh".
// With thinking off nothing is sent (the edge turns thinking off its own
// way); absent or enabled thinking sends it.
func TestParseOutputConfigEffort(t *testing.T) {
	for _, c := range []struct{ in, thinking, want string }{
		{`{"effort":"low"}`, ``, `low`},
		{`{"effort":"medium"}`, `{"type":"adaptive"}`, `medium`},
		{`{"effort":"high"}`, ``, ``},
		{`{"effort":"xhigh"}`, `{"type":"enabled","budget_tokens":1024}`, `xhigh`},
		{`{"effort":"max"}`, `{"type":"between_tools"}`, `xhigh`},
		{`{"effort":"low"}`, `{"type":"disabled"}`, ``},
		{`{"effort":"max"}`, `{"type":"disabled"}`, ``},
		{`{"effort":null}`, ``, ``},
		{`{}`, ``, ``},
		{`{"format":{"type":"json_schema","schema":{"type":"object"}},"task_budget":{"total":1}}`, ``, ``},
		{`null`, ``, ``},
	} {
		body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"output_config":` + c.in
		if c.thinking != "" {
			body += `,"thinking":` + c.thinking
		}
		body += `}`
		for _, chat := range bothChats(t, body) {
			var got struct {
				ReasoningEffort *string `json:"reasoning_effort"`
			}
			if err := json.Unmarshal(chat, &got); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == "" && got.ReasoningEffort != nil:
				t.Errorf("%s: reasoning_effort %q, want none", body, *got.ReasoningEffort)
			case c.want != "" && (got.ReasoningEffort == nil || *got.ReasoningEffort != c.want):
				t.Errorf("%s: chat %s, want reasoning_effort %q", body, chat, c.want)
			}
		}
	}
	for in, msg := range map[string]string{
		`"high"`:                     "output_config: expected an object",
		`[{"effort":"low"}]`:         "output_config: expected an object",
		`{"effort":"none"}`:          "output_config.effort: must be one of low, medium, high, xhigh, max",
		`{"effort":"HIGH"}`:          "output_config.effort: must be one of low, medium, high, xhigh, max",
		`{"effort":"minimal"}`:       "output_config.effort: must be one of low, medium, high, xhigh, max",
		`{"effort":""}`:              "output_config.effort: must be one of low, medium, high, xhigh, max",
		`{"effort":3}`:               "output_config.effort: expected a string",
		`{"effort":{"level":"low"}}`: "output_config.effort: expected a string",
	} {
		body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"output_config":` + in + `}`
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			_, e := parse([]byte(body))
			if e == nil || e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest || e.Message != msg {
				t.Errorf("%s: %+v, want a 400 %q", in, e, msg)
			}
		}
	}
}

// The tunnel's rendering (TunnelChat, without earlier thinking) carries
// the effort as the run's does.
func TestTunnelChatKeepsEffort(t *testing.T) {
	r, e := ParseRequest([]byte(`{"model":"m","max_tokens":64,"output_config":{"effort":"low"},"messages":[` +
		`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"plan","signature":""},{"type":"text","text":"ok"}]},` +
		`{"role":"user","content":"again"}]}`))
	if e != nil {
		t.Fatal(e)
	}
	run, tunnel := runAndTunnelChat(t, r)
	for name, body := range map[string][]byte{"run": run, "tunnel": tunnel} {
		var got struct {
			ReasoningEffort string `json:"reasoning_effort"`
		}
		if json.Unmarshal(body, &got) != nil || got.ReasoningEffort != "low" {
			t.Errorf("%s: %s", name, body)
		}
	}
}

// thinking.display "updates" is Anthropic's beta: taken (as "omitted")
// when an anthropic-beta value names thinking-display-updates-2026-08-18,
// in any position of a comma-separated list and any of several header
// values; refused as Anthropic refuses an unknown display otherwise.
// Nothing else needs a beta.
func TestCheckBetasDisplayUpdates(t *testing.T) {
	const base = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"thinking":`
	for _, c := range []struct {
		thinking string
		betas    []string
		ok       bool
	}{
		{`{"type":"adaptive","display":"updates"}`, nil, false},
		{`{"type":"adaptive","display":"updates"}`, []string{"interleaved-thinking-2025-05-14"}, false},
		{`{"type":"enabled","budget_tokens":2048,"display":"updates"}`, []string{"thinking-display-updates-2026-08-17"}, false},
		{`{"type":"adaptive","display":"updates"}`, []string{"thinking-display-updates-2026-08-18"}, true},
		{`{"type":"between_tools","display":"updates"}`, []string{"claude-code-20250219, thinking-display-updates-2026-08-18 ,x"}, true},
		{`{"type":"adaptive","display":"updates"}`, []string{"claude-code-20250219", "thinking-display-updates-2026-08-18"}, true},
		{`{"type":"adaptive","display":"omitted"}`, nil, true},
		{`{"type":"adaptive"}`, nil, true},
		{`{"type":"disabled","display":"updates"}`, nil, true}, // display is not read with thinking off
	} {
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			r, e := parse([]byte(base + c.thinking + `}`))
			if e != nil {
				t.Fatalf("%s: %v", c.thinking, e)
			}
			e = r.CheckBetas(c.betas)
			switch {
			case c.ok && e != nil:
				t.Errorf("%s, betas %q: %v", c.thinking, c.betas, e)
			case !c.ok && (e == nil || e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest ||
				e.Message != `thinking.display: must be one of summarized, omitted ("updates" needs the anthropic-beta thinking-display-updates-2026-08-18)`):
				t.Errorf("%s, betas %q: %+v, want the 400", c.thinking, c.betas, e)
			case c.ok && r.Thinking && !r.ThinkingOmitted && c.thinking != `{"type":"adaptive"}`:
				t.Errorf("%s: not read as omitted", c.thinking)
			}
		}
	}
}

// runAndTunnelChat is r's run body (OpenAIChat) and the tunnel's
// rendering of it (TunnelChat).
func runAndTunnelChat(t *testing.T, r *Request) (run, tunnel []byte) {
	t.Helper()
	run, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	if tunnel, err = r.TunnelChat(run, ReasoningNone); err != nil {
		t.Fatal(err)
	}
	return run, tunnel
}
