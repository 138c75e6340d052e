package openaicompat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// In the text tool-call form too, the assistant turn that called the tool
// (now <tool_call> text) carries its reasoning under the backend's member.
func TestTextFormKeepsHistoryReasoning(t *testing.T) {
	for kind, member := range map[string]string{TypeVLLM: reasoningMember, TypeOpenAICompat: ""} {
		t.Run(kind, func(t *testing.T) {
			build := func(base string) *Instance {
				cfg := testConfig(base)
				cfg.ToolMode = iop.ToolMode_TOOL_MODE_TEXT
				return newTestInstance(t, kind, cfg)
			}
			var msgs []map[string]json.RawMessage
			if err := json.Unmarshal([]byte(messagesSent(t, build, toolLoopWithReasoning)), &msgs); err != nil {
				t.Fatal(err)
			}
			var call map[string]json.RawMessage // the assistant turn that called
			for _, m := range msgs {
				var c string
				_ = json.Unmarshal(m["content"], &c)
				if string(m["role"]) == `"assistant"` && strings.Contains(c, "<tool_call>") {
					call = m
				}
			}
			if call == nil {
				t.Fatal("no assistant turn in text form")
			}
			want := `"The user wants the weather; call get_weather."`
			for _, name := range []string{reasoningMember, reasoningContentMember} {
				got, ok := call[name]
				if name == member && string(got) != want || name != member && ok {
					t.Fatalf("turn %s: member %s = %s, want the reasoning under %q only", call["content"], name, got, member)
				}
			}
		})
	}
}

// Reasoning goes back on assistant turns only: a system, user or tool
// message carrying some (no client sends it; the node does not judge)
// gets no such member.
func TestHistoryReasoningOnOtherRolesNotSent(t *testing.T) {
	text := func(s string) []*iop.ContentPart { return []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: s}}} }
	in := &iop.RunInput{Messages: []*iop.ChatMessage{
		{Role: iop.ChatRole_CHAT_ROLE_SYSTEM, Content: text("be brief"), Reasoning: "s"},
		{Role: iop.ChatRole_CHAT_ROLE_USER, Content: text("hi"), Reasoning: "u"},
		{Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, Content: text("hello"), Reasoning: "greet back"},
		{Role: iop.ChatRole_CHAT_ROLE_TOOL, Content: text("r"), ToolCallId: "c", Reasoning: "t"},
	}}
	for _, member := range []string{reasoningMember, reasoningContentMember} {
		body, err := requestBody(in, adapter.OpChat, "m", member)
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":"hello","` + member + `":"greet back"},{"role":"tool","content":"r","tool_call_id":"c"}]`
		if got := string(body["messages"]); got != want {
			t.Fatalf("%s: messages %s, want %s", member, got, want)
		}
	}
}
