package openaiapi

import (
	"runtime"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// historyReasonings normalizes body (validated first, as the edge does)
// and returns each message's reasoning.
func historyReasonings(t *testing.T, body string) []string {
	t.Helper()
	req, err := ParseChat([]byte(body))
	if err != nil {
		t.Fatalf("ParseChat: %v", err)
	}
	in, err := req.RunInput()
	if err != nil {
		t.Fatalf("RunInput: %v", err)
	}
	direct, err := NormalizeChat([]byte(body))
	if err != nil {
		t.Fatalf("NormalizeChat: %v", err)
	}
	out := make([]string, len(in.GetMessages()))
	for i, m := range in.GetMessages() {
		out[i] = m.GetReasoning()
		if d := direct.GetMessages()[i].GetReasoning(); d != out[i] {
			t.Fatalf("messages[%d]: NormalizeChat reasoning %q, RunInput %q", i, d, out[i])
		}
	}
	return out
}

// An assistant message's reasoning, sent back by an agent, reaches the run
// input under either name: "reasoning" (what the edge renders) wins when it
// holds text, else "reasoning_content" (DeepSeek, older vLLM); null or
// absent is none.
func TestHistoryReasoningNormalized(t *testing.T) {
	cases := []struct{ msg, want string }{
		{`"reasoning":"r"`, "r"},
		{`"reasoning_content":"rc"`, "rc"},
		{`"reasoning":"r","reasoning_content":"rc"`, "r"},
		{`"reasoning_content":"rc","reasoning":"r"`, "r"},
		{`"reasoning":"","reasoning_content":"rc"`, "rc"},
		{`"reasoning":null,"reasoning_content":"rc"`, "rc"},
		{`"reasoning":"r","reasoning_content":null`, "r"},
		{`"reasoning":null`, ""},
		{`"reasoning":"héllo \"quoted\"\n\u00e9"`, "héllo \"quoted\"\né"},
		{``, ""},
	}
	for _, c := range cases {
		t.Run(c.msg, func(t *testing.T) {
			sep := ""
			if c.msg != "" {
				sep = ","
			}
			got := historyReasonings(t, `{"model":"m","messages":[{"role":"user","content":"hi"},`+
				`{"role":"assistant","content":"hello"`+sep+c.msg+`},{"role":"user","content":"more"}]}`)
			if got[0] != "" || got[1] != c.want || got[2] != "" {
				t.Fatalf("reasonings = %q, want [\"\" %q \"\"]", got, c.want)
			}
		})
	}
}

// An assistant turn that only called tools, with its reasoning: the
// reasoning travels beside the calls (the case interleaved-thinking models
// need it back for).
func TestHistoryReasoningBesideToolCalls(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"reasoning":"Call the tool.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"18C"}]}`
	in, err := NormalizeChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	m := in.GetMessages()[1]
	if m.GetRole() != iop.ChatRole_CHAT_ROLE_ASSISTANT || m.GetReasoning() != "Call the tool." || len(m.GetToolCalls()) != 1 || len(m.GetContent()) != 0 {
		t.Fatalf("assistant message = %v", m)
	}
}

// Reasoning on a message of another role is accepted (type-checked) but
// not carried: no backend reads it there.
func TestHistoryReasoningOtherRolesDropped(t *testing.T) {
	got := historyReasonings(t, `{"model":"m","messages":[`+
		`{"role":"system","content":"s","reasoning":"a"},{"role":"developer","content":"d","reasoning_content":"b"},`+
		`{"role":"user","content":"u","reasoning":"c"},{"role":"tool","tool_call_id":"x","content":"t","reasoning":"d"}]}`)
	for i, r := range got {
		if r != "" {
			t.Fatalf("messages[%d] carries reasoning %q", i, r)
		}
	}
}

// A reasoning member that is not a string (nor null) is the caller's 400,
// naming the member, on any role: the tunnel's backend would refuse it or
// render it as text it is not.
func TestHistoryReasoningNotAStringRefused(t *testing.T) {
	for _, c := range []struct{ msg, param string }{
		{`"role":"assistant","content":"x","reasoning":1`, "messages[1].reasoning"},
		{`"role":"assistant","content":"x","reasoning":{"text":"r"}`, "messages[1].reasoning"},
		{`"role":"assistant","content":"x","reasoning":["r"]`, "messages[1].reasoning"},
		{`"role":"assistant","content":"x","reasoning":true`, "messages[1].reasoning"},
		{`"role":"assistant","content":"x","reasoning":"r","reasoning_content":7`, "messages[1].reasoning_content"},
		{`"role":"user","content":"x","reasoning_content":[]`, "messages[1].reasoning_content"},
	} {
		t.Run(c.msg, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"hi"},{` + c.msg + `}]}`
			_, err := ParseChat([]byte(body))
			wantErr(t, err, c.param, "string")
			_, err = NormalizeChat([]byte(body))
			wantErr(t, err, c.param, "string")
		})
	}
}

// The names are read exactly: a case variant (which Go's encoding/json,
// and so Ollama's OpenAI layer, would read as "reasoning") or a second
// copy is refused, as for every member the edge reads.
func TestHistoryReasoningVariantsRefused(t *testing.T) {
	for _, c := range []struct{ msg, param string }{
		{`"Reasoning":"r"`, "messages[1].Reasoning"},
		{`"reasoning_Content":"r"`, "messages[1].reasoning_Content"},
		{`"reasoning":"a","reasoning":"b"`, "messages[1].reasoning"},
	} {
		t.Run(c.msg, func(t *testing.T) {
			_, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x",` + c.msg + `}]}`))
			wantErr(t, err, c.param, "")
		})
	}
}

// Earlier reasoning does not count toward the prompt estimate (templates
// render it in part at most): a request estimates the same with it as
// without it.
func TestHistoryReasoningNotEstimated(t *testing.T) {
	parse := func(extra string) *ChatRequest {
		r, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"` + extra + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	without, with := parse(""), parse(`,"reasoning":"a long thought that is not prompt text"`)
	if with.PromptBytes != without.PromptBytes || with.EstimatePromptTokens() != without.EstimatePromptTokens() {
		t.Fatalf("PromptBytes %d with reasoning, %d without", with.PromptBytes, without.PromptBytes)
	}
}

// historyAllocated is the bytes f allocates per call, over 10 calls.
func historyAllocated(t *testing.T, f func() error) uint64 {
	t.Helper()
	const runs = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}

// historyLongReasoning is a 240 KB reasoning with escapes, as JSON text.
var historyLongReasoning = strings.Repeat(`step \"a\"\n`, 20000)

// Validation measures reasoning without decoding it: a long reasoning
// sent back costs ParseChat no more memory than a two-byte one.
func TestHistoryReasoningValidationDecodesNothing(t *testing.T) {
	body := func(r string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","reasoning":"` + r + `","reasoning_content":"` + r + `"}]}`)
	}
	parse := func(b []byte) func() error { return func() error { _, err := ParseChat(b); return err } }
	long, short := historyAllocated(t, parse(body(historyLongReasoning))), historyAllocated(t, parse(body("ab")))
	if long > short+16<<10 {
		t.Fatalf("ParseChat allocates %d bytes with a long reasoning, %d with a short one", long, short)
	}
}

// The run input decodes only the reasoning it carries: the one of the two
// names that wins, and none on a role that does not carry it (each used to
// be decoded, ~200 KB apiece here, and dropped).
func TestHistoryReasoningRunInputDecodesOnlyWhatItCarries(t *testing.T) {
	for _, c := range []struct{ name, msg string }{
		{"user", `{"role":"user","content":"more","reasoning":"%s","reasoning_content":"%s"}`},
		{"assistant", `{"role":"assistant","content":"y","reasoning":"ab","reasoning_content":"%s"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := func(r string) *ChatRequest {
				req, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},` + strings.ReplaceAll(c.msg, "%s", r) + `]}`))
				if err != nil {
					t.Fatal(err)
				}
				return req
			}
			run := func(req *ChatRequest) func() error { return func() error { _, err := req.RunInput(); return err } }
			long, short := historyAllocated(t, run(body(historyLongReasoning))), historyAllocated(t, run(body("cd")))
			if long > short+16<<10 {
				t.Fatalf("RunInput allocates %d bytes with a long reasoning it drops, %d with a short one", long, short)
			}
		})
	}
}
